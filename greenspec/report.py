"""A self-contained HTML report of one experiment: what ran and where, each regime's table with 95% intervals over
prompts and a three-valued verdict per cell (faster, slower, inconclusive: where the speedup's interval lies against
1), the paper's Tables 1-4, 6 and 7 (the dashboard's definitions, best per column in bold), speedup against acceptance
as interactive plotly figures, the round-cost table's prediction error, the failures.
One file, no network, no server: attach it to a review, a pull request or an e-mail (`greenspec report`, or
`Results.report` from Python)."""

from __future__ import annotations

import html
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from orchestrator.cli.outputs import check_out_path
from storage.db import display_url

if TYPE_CHECKING:
    from greenspec import Results

SHOWN = (  # (column, header, digits); a column with _lo/_hi is shown as "x [lo, hi]"
    ("tokens_per_s", "tok/s", 1),
    ("speedup", "speedup", 2),
    ("acceptance", "acceptance", 3),
    ("first_token_acceptance", "1st-token acc.", 3),
    ("mal", "MAL", 2),
    ("exact_match", "exact match", 2),
    ("j_per_100_tokens", "J / 100 tok", 1),
    ("energy_ratio", "energy ratio", 2),
)
KEYS = ("strategy", "task", "k", "measure", "n_prompts")
VERDICTS = ("faster", "slower", "inconclusive")
PREDICTED = " (predicted)"
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;font-size:.85em}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:right;white-space:nowrap}th{background:#f3f3f3}
td:first-child{text-align:left}pre{background:#f6f6f6;padding:1em;overflow:auto;max-height:30em}
.faster{color:#176917}.slower{color:#a11}.inconclusive{color:#777}"""


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows, read once from the database (`Results.report_data`)."""

    info: dict  # storage.queries.experiment_info
    status: dict  # storage.queries.status_counts
    results: pd.DataFrame  # the export table
    prediction_error: pd.DataFrame  # storage.costs.prediction_error (empty without replay)
    failures: pd.DataFrame  # storage.queries.failures_frame
    db_url: str  # the database it was read from, for the commands the report suggests


def verdict(row: pd.Series) -> str:
    """Where a cell's speedup interval lies against 1: faster, slower or inconclusive (plain: baseline)."""
    lo, hi = row.get("speedup_lo"), row.get("speedup_hi")
    if row.get("strategy") == "plain":
        return "baseline"
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return "inconclusive"
    return "faster" if lo > 1 else "slower" if hi < 1 else "inconclusive"


def _cell(row: pd.Series, col: str, digits: int) -> str:
    value = row.get(col)
    if value is None or pd.isna(value):
        return ""
    text = f"{value:.{digits}f}"
    lo, hi = row.get(f"{col}_lo"), row.get(f"{col}_hi")
    if lo is not None and hi is not None and not pd.isna(lo) and not pd.isna(hi):
        text += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return text


def regime_table(df: pd.DataFrame) -> pd.DataFrame:
    """One regime's rows as shown: keys, figures with intervals, the verdict (a replayed cell's time is the pass-cost
    model's prediction, so its verdict is one too: the model's own error is not inside the interval over prompts)."""
    rows = []
    for _, r in df.sort_values(["task", "strategy", "k"], key=lambda s: s.astype(str)).iterrows():
        shown = {key: r.get(key, "") for key in KEYS}
        shown.update({header: _cell(r, col, digits) for col, header, digits in SHOWN})
        predicted = r.get("measure") == "replay" and r.get("strategy") != "plain"
        shown["verdict"] = verdict(r) + (PREDICTED if predicted else "")
        rows.append(shown)
    return pd.DataFrame(rows)


def tally(table: pd.DataFrame) -> dict[str, int]:
    """Cells per verdict, predicted or measured alike."""
    counts = table["verdict"].str.removesuffix(PREDICTED).value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


def figures(df: pd.DataFrame) -> str:
    """Speedup against acceptance, one interactive plotly figure per regime with each cell's speedup interval;
    plotly.js inlined once (no network)."""
    import plotly.graph_objects as go  # deferred: plotly's import is a second

    data = df[(df["strategy"] != "plain") & df["speedup"].notna() & df["acceptance"].notna()]
    out, first = [], True
    for regime, part in data.groupby("regime", sort=True):
        hi = part["speedup_hi"].fillna(part["speedup"]) - part["speedup"]
        lo = part["speedup"] - part["speedup_lo"].fillna(part["speedup"])
        text = part["strategy"] + " / " + part["task"] + " / k=" + part["k"].astype(str) + " / " + part["measure"]
        fig = go.Figure(
            go.Scatter(
                x=part["acceptance"],
                y=part["speedup"],
                mode="markers",
                text=text,
                error_y={"type": "data", "array": hi, "arrayminus": lo, "thickness": 1},
                hovertemplate="%{text}<br>acceptance %{x:.3f}<br>speedup %{y:.2f}x<extra></extra>",
            )
        )
        fig.add_hline(y=1.0, line_dash="dash", line_color="#888")
        fig.update_layout(
            title=f"{regime}: speedup against acceptance",
            xaxis_title="acceptance",
            yaxis_title="speedup vs plain greedy",
            width=700,
            height=420,
            margin={"t": 50},
        )
        out.append(fig.to_html(full_html=False, include_plotlyjs="inline" if first else False))
        first = False
    return "".join(out)


def paper_tables(df: pd.DataFrame) -> str:
    """The paper's Tables 1-4, 6 and 7 over the run (one measure per cell: the replayed figure where there is one),
    from the same definitions as the dashboard's pages; Table 5 (redundancy of the texts) needs every text and is on
    the dashboard's Texts page."""
    from dashboard.tables import PAPER_TABLES, paper_rows, paper_table, styled  # deferred: pandas Styler and jinja2

    out = []
    for key, spec in PAPER_TABLES.items():
        rows = paper_rows(df, key)
        table = paper_table(rows, spec.metrics, spec.regime) if key != "table5" and not rows.empty else pd.DataFrame()
        if not table.empty:
            out.append(f"<h3>{html.escape(spec.title)}</h3>" + styled(table, spec.metrics).to_html())
    return "".join(out)


def _table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, escape=True, na_rep="", float_format=lambda x: f"{x:.3g}")


def _header(data: ReportData) -> list[str]:
    info, cells = data.info, data.status.get("cells", {})
    idle = f"{info['idle_power_w']:.1f} W" if info.get("idle_power_w") is not None else "not measured"
    sources = ", ".join(sorted(map(str, data.results.get("power_source", pd.Series()).dropna().unique()))) or "none"
    return [
        f"<h1>greenspec: {html.escape(info['name'])}</h1>",
        f"<p>Device: {html.escape(str(info.get('device')))}; power source: {html.escape(sources)}; idle floor: "
        f"{idle}; registered {html.escape(str(info.get('created_at')))}. Cells: "
        + ", ".join(f"{html.escape(str(k))} {v}" for k, v in cells.items())
        + ".</p><p>Figures are per-prompt means with 95% bootstrap intervals over prompts; a cell is <i>faster</i> or "
        "<i>slower</i> only where the speedup's whole interval lies above or below 1. Replayed cells (measure = replay) "
        "carry exact pass counts and times predicted by the round-cost table: their verdicts are predictions (the "
        "model's error is below); timed cells (measure = timed) were measured.</p>",
        f"<details><summary>The spec</summary><pre>{html.escape(info.get('spec_toml') or '')}</pre></details>",
    ]


def render(data: ReportData) -> str:
    """The report's HTML."""
    parts = _header(data)
    df = data.results
    if df.empty:
        parts.append("<p>No results yet.</p>")
    for (regime, temperature), part in df.groupby(["regime", "temperature"], sort=True):
        table = regime_table(part)
        counts = ", ".join(f'<span class="{v}">{n} {v}</span>' for v, n in tally(table).items())
        parts += [f"<h2>{html.escape(str(regime))}, temperature {temperature:g}</h2><p>{counts}</p>", _table(table)]
    if not df.empty:
        parts.append(
            "<h2>The paper's tables</h2><p>Means over prompts (the intervals are in the tables above); Table 5, the "
            "redundancy of the texts, is on the dashboard's Texts page.</p>" + paper_tables(df)
        )
        parts.append("<h2>Speedup against acceptance</h2>" + figures(df))
    if not data.prediction_error.empty:
        parts += ["<h2>The round-cost table's prediction error</h2>", _table(data.prediction_error)]
    parts.append(f"<h2>Failures</h2>{_table(data.failures) if len(data.failures) else '<p>None.</p>'}")
    name = html.escape(data.info["name"])
    parts.append(f"<p><small>The tables as CSV: <code>{html.escape(export_command(data))}</code>.</small></p>")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>greenspec: {name}</title>"
        f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )


def export_command(data: ReportData) -> str:
    """The command that exports the report's tables as CSV, with the --db it was read from (a password masked)."""
    db = display_url(data.db_url)
    return f"greenspec --db {shlex.quote(db)} export --experiment {shlex.quote(data.info['name'])} --format csv"


def write_report(results: Results, experiment: str | None, out: Path, force: bool = False) -> Path:
    """Write `out` (refusing to replace a file unless `force`, and never a database); its path."""
    check_out_path(str(out), "--out", force)
    out.write_text(render(results.report_data(experiment)), encoding="utf-8")
    return out
