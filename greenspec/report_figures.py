"""The report's figures, each coloured by strategy family (the draft a strategy runs: olifant, ngram, hybrid, ...)
with a legend, one panel per regime, sized to the page: speedup against acceptance, speedup against k, and the
round-cost table's validation. plotly.js is inlined once, in the first figure (no network)."""

from __future__ import annotations

import pandas as pd

PALETTE = (  # colour-blind-safe first (Okabe-Ito), then plotly's
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#D55E00",
    "#56B4E9",
    "#F0E442",
    "#000000",
    "#8C564B",
    "#7F7F7F",
    "#BCBD22",
    "#17BECF",
)
HEIGHT = 380
LEGEND = {"orientation": "h", "yanchor": "bottom", "y": 1.06, "xanchor": "left", "x": 0, "title": {"text": "family"}}


def family_colours(families) -> dict[str, str]:
    """A fixed colour per strategy family (sorted, so every figure of a report agrees)."""
    return {f: PALETTE[i % len(PALETTE)] for i, f in enumerate(sorted(set(families)))}


def _panels(regimes: list[str], title: str):
    from plotly.subplots import make_subplots  # deferred: plotly's import is a second

    fig = make_subplots(rows=1, cols=len(regimes), shared_yaxes=True, subplot_titles=regimes, horizontal_spacing=0.04)
    fig.update_layout(
        title={"text": title, "y": 0.98},
        height=HEIGHT,
        autosize=True,
        margin={"t": 95, "l": 60, "r": 20, "b": 50},
        legend=LEGEND,
    )
    return fig


def _drafted(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["strategy"] != "plain") & df["speedup"].notna()]


def _family_panels(data: pd.DataFrame, title: str, x_title: str, groups, trace) -> object:
    """One panel per regime of `data`; in each, a trace per group (`groups(part)` yields (family, frame)) made by
    `trace(family, frame, showlegend)`; each family in the legend once; plain's 1.0 dashed."""
    regimes = sorted(data["regime"].unique())
    fig = _panels(regimes, title)
    shown: set[str] = set()
    for col, regime in enumerate(regimes, start=1):
        for family, part in groups(data[data["regime"] == regime]):
            fig.add_trace(trace(family, part, family not in shown), row=1, col=col)
            shown.add(family)
        fig.add_hline(y=1.0, line_dash="dash", line_color="#888", row=1, col=col)
        fig.update_xaxes(title_text=x_title, row=1, col=col)
    fig.update_yaxes(title_text="speedup vs plain", row=1, col=1)
    return fig


def speedup_acceptance(df: pd.DataFrame, colours: dict[str, str]):
    """Each drafted cell's speedup (with its 95% interval) against its acceptance, one panel per regime."""
    import plotly.graph_objects as go

    data = _drafted(df)[lambda d: d["acceptance"].notna()]
    if data.empty:
        return None

    def trace(family: str, part: pd.DataFrame, showlegend: bool):
        hi = part["speedup_hi"].fillna(part["speedup"]) - part["speedup"]
        lo = part["speedup"] - part["speedup_lo"].fillna(part["speedup"])
        text = part["strategy"] + " / " + part["task"] + " / k=" + part["k"].astype(str) + " / " + part["measure"]
        return go.Scatter(
            x=part["acceptance"],
            y=part["speedup"],
            mode="markers",
            name=family,
            legendgroup=family,
            showlegend=showlegend,
            marker={"color": colours[family], "size": 7, "opacity": 0.8},
            text=text,
            error_y={"type": "data", "array": hi, "arrayminus": lo, "thickness": 1, "width": 0},
            hovertemplate="%{text}<br>acceptance %{x:.3f}<br>speedup %{y:.2f}x<extra></extra>",
        )

    title = "Speedup against acceptance (each cell; bars: 95% interval over prompts)"
    return _family_panels(data, title, "acceptance", lambda part: part.groupby("draft", sort=True), trace)


def speedup_k(df: pd.DataFrame, colours: dict[str, str]):
    """Each strategy's speedup against k (the mean over tasks), one line per strategy in its family's colour."""
    import plotly.graph_objects as go

    data = _drafted(df)
    if data.empty or data["k"].nunique() < 2:
        return None

    def lines(part: pd.DataFrame):
        means = part.groupby(["draft", "strategy", "k"], as_index=False)["speedup"].mean()
        for (family, _), line in means.groupby(["draft", "strategy"], sort=True):
            yield family, line

    def trace(family: str, line: pd.DataFrame, showlegend: bool):
        return go.Scatter(
            x=line["k"],
            y=line["speedup"],
            mode="lines+markers",
            name=family,
            legendgroup=family,
            showlegend=showlegend,
            line={"color": colours[family], "width": 1.5},
            text=line["strategy"],
            hovertemplate="%{text}<br>k=%{x}<br>speedup %{y:.2f}x<extra></extra>",
        )

    title = "Speedup against k (each strategy, the mean over its tasks)"
    return _family_panels(data, title, "k", lines, trace)


VALIDATION = (
    ("median_error", "median |error|", "#0072B2"),
    ("abs_bias", "|bias|", "#D55E00"),
    ("drift", "machine's drift", "#CC79A7"),
    ("noise", "timing noise", "#7F7F7F"),
    ("table_error", "the table's own error", "#009E73"),
)


def validation(errors: pd.DataFrame):
    """The round-cost table's validation per regime (band "all"): median |predicted / measured - 1|, |bias|, the
    machine's drift over the timings, the run's own timing noise and the table's own error beyond it, side by side; None without validation pairs."""
    import plotly.graph_objects as go

    rows = errors[(errors["band"] == "all") & (errors["pairs"] > 0)] if not errors.empty else errors
    if rows.empty:
        return None
    rows = rows.assign(abs_bias=rows["bias"].abs())
    fig = go.Figure(
        [
            go.Bar(x=rows["regime"], y=rows[col], name=label, marker_color=colour)
            for col, label, colour in VALIDATION
            if rows[col].notna().any()
        ]
    )
    fig.update_layout(
        title={"text": "The cost model's validation: replayed against timed tokens/s, per regime", "y": 0.98},
        barmode="group",
        height=HEIGHT,
        autosize=True,
        yaxis={"title": "relative error", "tickformat": ".0%"},
        margin={"t": 95, "l": 60, "r": 20, "b": 50},
        legend={**LEGEND, "title": {"text": ""}},
    )
    return fig


def figures_html(results: pd.DataFrame, errors: pd.DataFrame) -> list[tuple[str, str]]:
    """(id, HTML) of each figure the data has, plotly.js inlined in the first only."""
    colours = family_colours(results.loc[results["strategy"] != "plain", "draft"].dropna())
    made = [
        ("fig-acceptance", speedup_acceptance(results, colours) if not results.empty else None),
        ("fig-k", speedup_k(results, colours) if not results.empty else None),
        ("fig-validation", validation(errors)),
    ]
    out = []
    for key, fig in made:
        if fig is None:
            continue
        js = "inline" if not out else False
        out.append((key, fig.to_html(full_html=False, include_plotlyjs=js, config={"responsive": True}, div_id=key)))
    return out
