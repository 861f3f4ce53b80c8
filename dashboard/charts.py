"""Plotly figures for the paper's figures; pure functions of summary / generation / power frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from analysis.tables import PLAIN

TEMPLATE = "plotly_white"
REGIME_ORDER = ["uncached", "cached"]


def _finish(fig: go.Figure, title: str) -> go.Figure:
    fig.update_layout(template=TEMPLATE, title=title, legend_title_text="", margin=dict(t=70, l=10, r=10, b=10))
    fig.for_each_annotation(lambda a: a.update(text=a.text.removeprefix("regime=")))
    return fig


def _over_tasks(summary: pd.DataFrame, value: str) -> pd.DataFrame:
    """Mean of `value` over the selected tasks per strategy x k x regime."""
    return summary.groupby(["strategy", "k", "regime"], as_index=False)[value].mean()


def _with_error_bars(summary: pd.DataFrame, value: str) -> tuple[pd.DataFrame, bool]:
    """Per strategy x k x regime: `value` and, where the selection is one task (so each point is one cell), its 95%
    interval over prompts as error-bar lengths `<value>_plus` / `<value>_minus`; (frame, whether it has them). A mean
    over several tasks has no interval of its own here: the tables give each task's."""
    one_task = summary["task"].nunique() == 1 and {f"{value}_lo", f"{value}_hi"} <= set(summary.columns)
    if not one_task:
        return _over_tasks(summary, value), False
    df = summary.groupby(["strategy", "k", "regime"], as_index=False)[[value, f"{value}_lo", f"{value}_hi"]].mean()
    df[f"{value}_plus"] = df[f"{value}_hi"] - df[value]
    df[f"{value}_minus"] = df[value] - df[f"{value}_lo"]
    return df, True


def _interval_title(title: str, bars: bool) -> str:
    return f"{title}; bars: 95% intervals over prompts" if bars else f"{title} (pick one task for 95% intervals)"


def speedup_vs_k(summary: pd.DataFrame) -> go.Figure:
    """Figure 1: speedup over plain vs k, one panel per regime, one line per strategy, break-even at 1.0; error bars
    are the 95% intervals over prompts (paired with plain) when one task is selected."""
    df, bars = _with_error_bars(summary[summary["draft"] != PLAIN], "speedup")
    fig = px.line(
        df.sort_values("k"),
        x="k",
        y="speedup",
        color="strategy",
        facet_col="regime",
        markers=True,
        category_orders={"regime": REGIME_ORDER},
        **(dict(error_y="speedup_plus", error_y_minus="speedup_minus") if bars else {}),
    )
    fig.add_hline(
        y=1.0,
        line_dash="dash",
        line_color="gray",
        annotation_text="break-even (plain)",
        annotation_position="bottom right",
    )
    fig.update_xaxes(tickmode="array", tickvals=sorted(df["k"].unique()))
    fig.update_yaxes(title_text="speedup over plain", col=1)
    return _finish(fig, _interval_title("Figure 1: speedup vs k (mean over selected tasks)", bars))


def _first_token_trace(group: pd.DataFrame, strategy: str, color: str | None, legend: bool, bars: bool) -> go.Scatter:
    """One strategy's first-token acceptance vs k (dotted, in its acceptance line's colour), with its error bars."""
    error = None
    if bars:  # without bars the frame has no bar lengths
        plus, minus = group["first_token_acceptance_plus"], group["first_token_acceptance_minus"]
        error = dict(type="data", array=plus, arrayminus=minus)
    return go.Scatter(
        x=group["k"],
        y=group["first_token_acceptance"],
        mode="lines+markers",
        name=f"{strategy} first-token",
        legendgroup=strategy,
        showlegend=legend,
        line=dict(dash="dot", color=color),
        error_y=error,
    )


def acceptance_vs_k(summary: pd.DataFrame) -> go.Figure:
    """Acceptance (solid) and first-token acceptance (dotted) vs k per strategy and regime, with the break-even k/(k+1);
    error bars are the 95% intervals over prompts when one task is selected."""
    drafted = summary[summary["draft"] != PLAIN]
    df, bars = _with_error_bars(drafted, "acceptance")
    fta, _ = _with_error_bars(drafted, "first_token_acceptance")
    df = df.merge(fta, on=["strategy", "k", "regime"])
    fig = px.line(
        df.sort_values("k"),
        x="k",
        y="acceptance",
        color="strategy",
        facet_col="regime",
        markers=True,
        category_orders={"regime": REGIME_ORDER},
        **(dict(error_y="acceptance_plus", error_y_minus="acceptance_minus") if bars else {}),
    )
    colors = {t.name: t.line.color for t in fig.data}
    regimes = [r for r in REGIME_ORDER if r in set(df["regime"])] + sorted(set(df["regime"]) - set(REGIME_ORDER))
    for col, regime in enumerate(regimes, start=1):
        for strategy, group in df[df["regime"] == regime].sort_values("k").groupby("strategy"):
            fig.add_trace(_first_token_trace(group, strategy, colors.get(strategy), col == 1, bars), row=1, col=col)
    ks = np.arange(1, max(int(df["k"].max()) if not df.empty else 8, 2) + 1)
    for col in range(1, len(regimes) + 1):
        fig.add_trace(
            go.Scatter(
                x=ks,
                y=ks / (ks + 1),
                mode="lines",
                name="break-even k/(k+1)",
                line=dict(dash="dash", color="gray"),
                showlegend=col == 1,
            ),
            row=1,
            col=col,
        )
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05])
    return _finish(
        fig, _interval_title("Acceptance (solid), first-token acceptance (dotted) and the break-even k/(k+1)", bars)
    )


def learning_curve_chart(points: pd.DataFrame, k: int) -> dict:
    """Acceptance against the base's tokens (log axis), one line per draft family, one panel per regime, with each
    point's 95% interval over prompts as error bars (`analysis.curve.curve_points`); as a dict (`show_chart`)."""
    df = points.assign(
        plus=points["acceptance_hi"] - points["acceptance"], minus=points["acceptance"] - points["acceptance_lo"]
    )
    fig = px.line(
        df,
        x="tokens",
        y="acceptance",
        color="family",
        facet_col="regime",
        error_y="plus",
        error_y_minus="minus",
        markers=True,
        log_x=True,
        hover_data=["strategy", "n_prompts"],
    )
    fig.update_yaxes(tickformat=".0%")
    return _finish(
        fig, f"Learning curve: acceptance against the base's size (k = {k}; bars: 95% intervals over prompts)"
    ).to_dict()


def accepted_length_hist(counts: pd.DataFrame) -> go.Figure:
    """Share of verifier rounds that accepted 0..k draft tokens, per strategy, one panel per k.

    `counts`: strategy, k, accepted, rounds (as `storage.browse.accepted_length_counts` sums them in SQL).
    """
    total = counts.groupby(["strategy", "k"])["rounds"].transform("sum")
    df = counts.assign(share=counts["rounds"] / total.where(total > 0, 1))
    fig = px.bar(df, x="accepted", y="share", color="strategy", barmode="group", facet_col="k")
    fig.update_xaxes(matches=None)  # each panel spans its own 0..k
    fig.update_yaxes(tickformat=".0%", title_text="share of rounds", col=1)
    fig.update_xaxes(title_text="accepted draft tokens", dtick=1)
    return _finish(fig, "Accepted length per verification round")


def tokens_per_joule_ladder(summary: pd.DataFrame, label: str) -> go.Figure:
    """Figure 2: tokens per joule, best k per strategy and regime, both regimes ranked in one ladder."""
    df = _over_tasks(summary.dropna(subset=["tokens_per_j"]), "tokens_per_j")
    best = df.loc[df.groupby(["strategy", "regime"])["tokens_per_j"].idxmax()] if not df.empty else df
    names = [
        f"{s}, {r}" if s == PLAIN else f"{s} (k={k}), {r}"
        for s, k, r in zip(best["strategy"], best["k"], best["regime"])
    ]
    best = best.assign(name=names).sort_values("tokens_per_j")
    fig = px.bar(
        best,
        x="tokens_per_j",
        y="name",
        color="regime",
        orientation="h",
        text_auto=".2f",
        category_orders={"regime": REGIME_ORDER},
    )
    fig.update_yaxes(title_text="", categoryorder="array", categoryarray=list(best["name"]))
    fig.update_xaxes(title_text="tokens per joule")
    fig.update_layout(height=max(300, 28 * len(best) + 120))
    return _finish(fig, f"Figure 2: tokens per joule, best k per strategy, both regimes ranked ({label})")


def power_vs_k(summary: pd.DataFrame, label: str) -> go.Figure:
    """Mean power (W) vs k per strategy and regime (plain at k = 0)."""
    df = _over_tasks(summary.dropna(subset=["mean_power_w"]), "mean_power_w")
    fig = px.line(
        df.sort_values("k"),
        x="k",
        y="mean_power_w",
        color="strategy",
        facet_col="regime",
        markers=True,
        category_orders={"regime": REGIME_ORDER},
    )
    fig.update_yaxes(title_text="mean power (W)", col=1)
    return _finish(fig, f"Mean power vs k ({label})")


def power_trace(samples: pd.DataFrame, t0: float, t1: float, label: str) -> go.Figure:
    """Power (W) against seconds since the generation started, its window shaded."""
    df = samples.assign(t=samples["t_s"] - t0)
    fig = px.line(df, x="t", y="power_w", color="source", markers=True)
    fig.add_vrect(x0=0, x1=t1 - t0, fillcolor="green", opacity=0.08, line_width=0, annotation_text="generation")
    fig.update_xaxes(title_text="seconds since start")
    fig.update_yaxes(title_text="power (W)")
    return _finish(fig, f"Power trace ({label})")


STATE_COLOURS = {"done": "#2ca02c", "running": "#1f77b4", "pending": "#c7c7c7", "failed": "#d62728"}


def queue_progress(groups: dict[str, dict[str, int]]) -> go.Figure:
    """Stacked bars of cell states per group of kinds (training, reference, replay, timed, ...;
    `greenspec.status.kind_groups`), in the order a run meets them."""
    rows = [{"kind": g, "state": s, "cells": n} for g, c in groups.items() for s, n in c.items()]
    fig = px.bar(
        pd.DataFrame(rows, columns=["kind", "state", "cells"]),
        x="cells",
        y="kind",
        color="state",
        orientation="h",
        color_discrete_map=STATE_COLOURS,
        category_orders={"state": list(STATE_COLOURS), "kind": list(groups)},
    )
    fig.update_layout(height=90 + 40 * max(len(groups), 1), margin={"t": 40})
    return _finish(fig, "Queue by kind and state")
