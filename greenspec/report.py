"""A self-contained HTML report of one experiment that reads top-down: the experiment, the machine and a paragraph
of what ran and what it found; the findings (`greenspec.findings`: the paper's claims and the future-work targets,
each with its verdict); figures coloured by strategy family with a legend (`greenspec.report_figures`); then the
full tables, each behind a heading of the table of contents and collapsed, never wider than the page: each regime's
cells with 95% intervals over prompts and a faster / slower / inconclusive verdict (where the speedup's interval lies
against 1), the paper's Tables 1-4, 6 and 7, the round-cost table's prediction error, the failures and the spec.
One file, no network, no server: attach it to a review, a pull request or an e-mail (`greenspec report`, or
`Results.report` from Python)."""

from __future__ import annotations

import html
import shlex
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from analysis.stats import HOLDS
from analysis.stats import verdict as rule
from greenspec.outputs import check_out_path
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
STYLE = """body{font-family:system-ui,sans-serif;margin:1em 2em;max-width:90em;line-height:1.35}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1em 0 .3em}p{margin:.3em 0}
nav{font-size:.9em;margin:.4em 0}nav a{margin-right:.9em}
.wrap{max-width:100%;overflow-x:auto}.scroll{max-height:32vh;overflow-y:auto;border:1px solid #ddd}
#findings-table td{white-space:normal}#findings-table th{text-align:left}
table{border-collapse:collapse;font-size:.82em}th,td{border:1px solid #ccc;padding:.15em .45em;text-align:right;
white-space:nowrap}th{background:#f3f3f3;position:sticky;top:0}td:first-child,td.l{text-align:left}
td.wide{white-space:normal;min-width:30em;text-align:left}summary{cursor:pointer;margin:.3em 0}
pre{background:#f6f6f6;padding:1em;overflow:auto;max-height:30em}.figure{max-width:100%;overflow:hidden}
.faster,.holds{color:#176917}.slower,.does-not-hold{color:#a11}.inconclusive{color:#777}.tie{color:#0b5394}
.not-testable-here,.by-construction{color:#999}.notes{white-space:pre-wrap;font-style:italic}
.tag{background:#e8eef7;border-radius:.8em;padding:.05em .6em;margin-right:.4em;font-size:.85em}"""


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows, read once from the database (`Results.report_data`)."""

    info: dict  # storage.queries.experiment_info
    status: dict  # storage.queries.status_counts
    results: pd.DataFrame  # the export table
    prediction_error: pd.DataFrame  # storage.validation.prediction_error (empty without replay)
    failures: pd.DataFrame  # storage.queries.failures_frame
    db_url: str  # the database it was read from, for the commands the report suggests
    findings: pd.DataFrame | None = None  # greenspec.findings (read by `write_report`)


def verdict(row: pd.Series) -> str:
    """Where a cell's speedup interval lies against 1, by the findings' own rule (`analysis.stats.verdict`): faster
    where "speedup > 1" holds, slower where "speedup < 1" holds, else inconclusive (plain: baseline)."""
    lo, hi = row.get("speedup_lo"), row.get("speedup_hi")
    if row.get("strategy") == "plain":
        return "baseline"
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return "inconclusive"
    return (
        "faster" if rule(lo, hi, 1.0, ">") == HOLDS else "slower" if rule(lo, hi, 1.0, "<") == HOLDS else "inconclusive"
    )


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


def paper_tables(df: pd.DataFrame) -> str:
    """The paper's Tables 1-4, 6 and 7 over the run (one measure per cell: the replayed figure where there is one),
    from the same definitions as the dashboard's pages; Table 5 (redundancy of the texts) needs every text and is on
    the dashboard's Texts page."""
    from analysis.tables import PAPER_TABLES, paper_rows, paper_table, styled  # deferred: pandas Styler and jinja2

    out = []
    for key, spec in PAPER_TABLES.items():
        rows = paper_rows(df, key)
        table = paper_table(rows, spec.metrics, spec.regime) if key != "table5" and not rows.empty else pd.DataFrame()
        if not table.empty:
            out.append(f"<h3>{html.escape(spec.title)}</h3>" + styled(table, spec.metrics).to_html())
    return "".join(out)


def _table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, escape=True, na_rep="", float_format=lambda x: f"{x:.3g}")


def notes_and_tags(spec_toml: str | None) -> tuple[str, list[str]]:
    """The spec's `[experiment] notes` and `tags` ("" and [] where it has none or does not parse)."""
    try:
        e = tomllib.loads(spec_toml or "").get("experiment", {})
    except tomllib.TOMLDecodeError:
        return "", []
    tags = e.get("tags", [])
    return str(e.get("notes", "") or ""), [str(t) for t in tags] if isinstance(tags, list) else []


def _notes(info: dict) -> str:
    notes, tags = notes_and_tags(info.get("spec_toml"))
    shown = "".join(f'<span class="tag">{html.escape(t)}</span>' for t in tags)
    return (f"<p>{shown}</p>" if tags else "") + (f'<p class="notes">{html.escape(notes)}</p>' if notes else "")


def _header(data: ReportData) -> str:
    """The experiment (its tags and notes), the machine and when."""
    info, cells = data.info, data.status.get("cells", {})
    idle = f"{info['idle_power_w']:.1f} W" if info.get("idle_power_w") is not None else "not measured"
    sources = ", ".join(sorted(map(str, data.results.get("power_source", pd.Series()).dropna().unique()))) or "none"
    return (
        f"<h1>greenspec: {html.escape(info['name'])}</h1><p>Machine: {html.escape(str(info.get('device')))}; power "
        f"source: {html.escape(sources)}; idle floor: {idle}; registered {html.escape(str(info.get('created_at'))[:19])}. "
        "Cells: " + ", ".join(f"{html.escape(str(k))} {v}" for k, v in cells.items()) + ".</p>" + _notes(info)
    )


def _best(df: pd.DataFrame) -> str:
    """ "cached: olifant-pydoc on pydoc, k=5, 1.42x [1.30, 1.55] (predicted)" per regime: each one's best cell."""
    drafted = df[(df["strategy"] != "plain") & df["speedup"].notna()]
    out = []
    for regime, part in drafted.groupby("regime", sort=True):
        r = part.loc[part["speedup"].idxmax()]
        how = " (predicted)" if r.get("measure") == "replay" else ""
        value, _, bounds = _cell(r, "speedup", 2).partition(" ")
        out.append(f"{regime}: {r['strategy']} on {r['task']}, k={r['k']}, {value}x {bounds}".rstrip() + how)
    return "; ".join(out)


def summary(data: ReportData) -> str:
    """One paragraph: what ran, how it was measured, its best speedups and what the findings say."""
    from greenspec.findings import tally as findings_tally

    df, kinds = data.results, data.status
    if df.empty:
        return "<p>No results yet.</p>"
    families = ", ".join(sorted(df.loc[df["strategy"] != "plain", "draft"].dropna().unique())) or "none"
    replayed = kinds.get("replay", {}).get("done", 0)
    timed = kinds.get("sweep", {}).get("done", 0)
    text = (
        f"{df['strategy'].nunique()} strategies (families: {families}) on {df['task'].nunique()} tasks in "
        f"{', '.join(sorted(df['regime'].unique()))}; {replayed} cells replayed (exact passes, times predicted by the "
        f"round-cost table) and {timed} timed. Best speedup per regime: {_best(df) or 'none'}. Figures are per-prompt "
        "means with 95% bootstrap intervals over prompts."
    )
    if data.findings is not None:
        text += f" Findings: {findings_tally(data.findings)}."
    return f"<p>{html.escape(text)}</p>"


def _verdict_cell(v: str) -> str:
    return f'<td class="l {v.replace(" ", "-")}">{html.escape(v)}</td>'


def findings_html(frame: pd.DataFrame | None) -> str:
    """The findings: the verdicts (scrolling within the first screen), what the grid cannot answer, their numbers
    behind a summary."""
    from greenspec.findings import RULES, estimate_text, tally

    if frame is None:
        return ""
    judged, gaps = frame[frame["verdict"] != "not testable here"], frame[frame["verdict"] == "not testable here"]
    rows = []
    for _, r in judged.iterrows():
        cells = [r["target"], r["task"], r["regime"], "" if pd.isna(r["k"]) else str(int(r["k"]))]
        cells += [estimate_text(r), "" if pd.isna(r["prompts"]) else str(int(r["prompts"])), r["correction"]]
        cells.append(r["reason"])
        rows.append(
            "<tr>"
            + _verdict_cell(r["verdict"])
            + "".join(f'<td class="l">{html.escape(str(c))}</td>' for c in cells)
            + "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "verdict",
            "claim or target",
            "task",
            "regime",
            "k",
            "estimate [95%]",
            "prompts",
            "family correction",
            "why inconclusive",
        )
    )
    table = (
        f'<div class="wrap scroll"><table id="findings-table"><tr>{head}</tr>{"".join(rows)}</table></div>'
        if rows
        else ""
    )
    missing = "".join(f"<li>{html.escape(r.target)}: {html.escape(r.reason)}</li>" for r in gaps.itertuples())
    numbers = judged[["target", "task", "regime", "detail"]]
    return (
        f'<h2 id="findings">Findings</h2><p>{html.escape(tally(frame))}. {html.escape(RULES)}.</p>{table}'
        + (
            f"<details><summary>Not testable on this grid ({len(gaps)})</summary><ul>{missing}</ul></details>"
            if len(gaps)
            else ""
        )
        + (
            f"<details><summary>The numbers behind each verdict</summary>{_wide_table(numbers)}</details>"
            if len(judged)
            else ""
        )
    )


def _wide_table(df: pd.DataFrame) -> str:
    return f'<div class="wrap">{_table(df)}</div>'


def render(data: ReportData) -> str:  # long: the report's sections in reading order, one block each
    """The report's HTML."""
    from greenspec.report_figures import figures_html

    df = data.results
    figs = figures_html(df, data.prediction_error)
    groups = list(df.groupby(["regime", "temperature"], sort=True)) if not df.empty else []
    toc = [("findings", "Findings"), ("figures", "Figures")] if data.findings is not None else [("figures", "Figures")]
    toc += [(_anchor(regime, t), f"{regime} table") for (regime, t), _ in groups]
    toc += [
        ("paper-tables", "Paper's tables"),
        ("cost-model", "Cost model"),
        ("failures", "Failures"),
        ("spec", "Spec"),
    ]
    parts = [
        _header(data),
        summary(data),
        "<nav>" + "".join(f'<a href="#{k}">{html.escape(v)}</a>' for k, v in toc) + "</nav>",
        findings_html(data.findings),
        '<h2 id="figures">Figures</h2>' + "".join(f'<div class="figure">{h}</div>' for _, h in figs),
    ]
    parts.append(
        '<h2 id="tables">Tables</h2><p>Every cell with its 95% interval over prompts; a cell is <i>faster</i> '
        "or <i>slower</i> only where the speedup's whole interval lies above or below 1. Replayed cells (measure = "
        "replay) carry exact pass counts and times predicted by the round-cost table: their verdicts are predictions "
        "(the model's error is under Cost model); timed cells were measured.</p>"
    )
    for (regime, temperature), part in groups:
        table = regime_table(part)
        counts = ", ".join(f'<span class="{v}">{n} {v}</span>' for v, n in tally(table).items())
        parts.append(
            f'<h3 id="{_anchor(regime, temperature)}">{html.escape(str(regime))}, temperature '
            f"{temperature:g}</h3><details><summary>{len(table)} cells: {counts}</summary>{_wide_table(table)}</details>"
        )
    paper = paper_tables(df) if not df.empty else ""
    parts.append(
        '<h2 id="paper-tables">The paper\'s tables</h2>'
        + (
            f"<details><summary>Tables 1-4, 6 and 7 (means "
            "over prompts; the intervals are in the tables above; Table 5 is on the dashboard's Texts page)</summary>"
            f'<div class="wrap">{paper}</div></details>'
            if paper
            else "<p>None.</p>"
        )
    )
    err = data.prediction_error
    parts.append(
        '<h2 id="cost-model">The round-cost table\'s prediction error</h2>'
        + (_wide_table(err) if not err.empty else "<p>No generation was both timed and replayed.</p>")
    )
    fails = data.failures
    parts.append(
        '<h2 id="failures">Failures</h2>'
        + (
            f"<details><summary>{len(fails)} failed cells</summary>{_wide_table(fails)}</details>"
            if len(fails)
            else "<p>None.</p>"
        )
    )
    parts.append(
        f'<h2 id="spec">Spec</h2><details><summary>The spec</summary><pre>{html.escape(data.info.get("spec_toml") or "")}</pre></details>'
    )
    parts.append(f"<p><small>The tables as CSV: <code>{html.escape(export_command(data))}</code>.</small></p>")
    name = html.escape(data.info["name"])
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
        f"<title>greenspec: {name}</title><style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )


def _anchor(regime, temperature) -> str:
    return f"table-{regime}-t{temperature:g}".replace(" ", "-").replace(".", "_")


def export_command(data: ReportData) -> str:
    """The command that exports the report's tables as CSV, with the --db it was read from (a password masked)."""
    db = display_url(data.db_url)
    return f"greenspec --db {shlex.quote(db)} export --experiment {shlex.quote(data.info['name'])} --format csv"


def write_report(results: Results, experiment: str | None, out: Path, force: bool = False) -> Path:
    """Write `out` (refusing to replace a file unless `force`, and never a database); its path."""
    check_out_path(str(out), "--out", force)
    from greenspec.findings import read_findings

    data = results.report_data(experiment)
    with results.Session() as s:  # the cost model's error as report_data read it, not read again
        data = replace(data, findings=read_findings(s, data.info["name"], data.prediction_error))
    out.write_text(render(data), encoding="utf-8")
    return out
