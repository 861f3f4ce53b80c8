"""A self-contained HTML report of one experiment: what ran, each regime's table with 95% intervals over prompts,
a three-valued verdict per cell (faster, slower, inconclusive: where the speedup's interval lies against 1), and
speedup against acceptance as an inline SVG figure. One file, no external assets: attach it to a review, a pull request or an
e-mail (`greenspec report`, or `Results.report` from Python)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from orchestrator.cli.outputs import check_out_path

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
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;font-size:.85em}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:right;white-space:nowrap}th{background:#f3f3f3}td:first-child{text-align:left}
.faster{color:#176917}.slower{color:#a11}.inconclusive{color:#777}"""


def verdict(row: pd.Series) -> str:
    """Where a cell's speedup interval lies against 1: faster, slower or inconclusive (plain: baseline)."""
    lo, hi = row.get("speedup_lo"), row.get("speedup_hi")
    if row.get("strategy") == "plain":
        return "baseline"
    if pd.isna(lo) or pd.isna(hi):
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
    """One regime's rows as shown: keys, figures with intervals, the verdict."""
    rows = []
    for _, r in df.sort_values(["task", "strategy", "k"], key=lambda s: s.astype(str)).iterrows():
        shown = {key: r.get(key, "") for key in KEYS}
        shown.update({header: _cell(r, col, digits) for col, header, digits in SHOWN})
        # a replayed cell's time is the pass-cost model's prediction: its verdict is one, whose error is not inside
        # the interval over prompts
        shown["verdict"] = verdict(r) + (
            " (predicted)" if r.get("measure") == "replay" and r.get("strategy") != "plain" else ""
        )
        rows.append(shown)
    return pd.DataFrame(rows)


def figure(df: pd.DataFrame) -> str:
    """Speedup against acceptance, one inline SVG panel per regime, each cell with its speedup interval."""
    data = df[(df["strategy"] != "plain") & df["speedup"].notna() & df["acceptance"].notna()]
    return "".join(_panel(str(regime), part) for regime, part in data.groupby("regime", sort=True))


def _panel(title: str, part: pd.DataFrame, w: int = 360, h: int = 260, pad: int = 40) -> str:
    lo = part["speedup_lo"].fillna(part["speedup"])
    hi = part["speedup_hi"].fillna(part["speedup"])
    x0, x1 = 0.0, max(float(part["acceptance"].max()), 0.05) * 1.05
    y0, y1 = min(float(lo.min()), 1.0) * 0.95, max(float(hi.max()), 1.0) * 1.05

    def px(x: float) -> float:
        return pad + (x - x0) / (x1 - x0) * (w - 1.5 * pad)

    def py(y: float) -> float:
        return h - pad - (y - y0) / (y1 - y0) * (h - 1.5 * pad)

    marks = [
        f'<line x1="{px(a):.1f}" x2="{px(a):.1f}" y1="{py(bot):.1f}" y2="{py(top):.1f}" stroke="#79a"/>'
        f'<circle cx="{px(a):.1f}" cy="{py(m):.1f}" r="2.5" fill="#247"><title>{html.escape(str(n))} '
        f"{html.escape(str(t))} k={k}: {m:.2f}x</title></circle>"
        for a, m, bot, top, n, t, k in zip(
            part["acceptance"], part["speedup"], lo, hi, part["strategy"], part["task"], part["k"]
        )
    ]
    axes = (
        f'<line x1="{pad}" x2="{w - pad / 2}" y1="{py(1.0):.1f}" y2="{py(1.0):.1f}" stroke="#aaa" stroke-dasharray="4"/>'
        f'<line x1="{pad}" x2="{pad}" y1="{pad / 2}" y2="{h - pad}" stroke="#333"/>'
        f'<line x1="{pad}" x2="{w - pad / 2}" y1="{h - pad}" y2="{h - pad}" stroke="#333"/>'
        f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle" font-size="11">acceptance (0 to {x1:.2f})</text>'
        f'<text x="12" y="{h / 2}" font-size="11" transform="rotate(-90 12 {h / 2})" text-anchor="middle">'
        f"speedup ({y0:.2f} to {y1:.2f})</text>"
        f'<text x="{w / 2}" y="14" text-anchor="middle" font-size="12">{html.escape(title)}</text>'
    )
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">{axes}{"".join(marks)}</svg>'


def render(name: str, status: dict, df: pd.DataFrame) -> str:
    """The report's HTML for one experiment's export table `df`."""
    parts = [f"<h1>greenspec: {html.escape(name)}</h1>"]
    cells = ", ".join(f"{html.escape(str(k))} {v}" for k, v in status.get("cells", {}).items())
    parts.append(
        f"<p>Cells: {cells or 'none'}. Figures are per-prompt means with 95% bootstrap intervals over prompts; "
        "a cell is <i>faster</i> or <i>slower</i> only where the speedup's whole interval lies above or below 1. "
        "Replayed cells (measure = replay) carry exact pass counts and times predicted by the pass-cost model: "
        "their verdicts are predictions, and the model's own error (the Cost model page) is not inside the "
        "interval; timed cells (measure = timed) were measured.</p>"
    )
    if df.empty:
        parts.append("<p>No results yet.</p>")
    for (regime, temperature), part in df.groupby(["regime", "temperature"], sort=True):
        table = regime_table(part)
        counts = table["verdict"].str.removesuffix(" (predicted)").value_counts().to_dict()
        tally = ", ".join(
            f'<span class="{v}">{counts.get(v, 0)} {v}</span>' for v in ("faster", "slower", "inconclusive")
        )
        parts.append(f"<h2>{html.escape(str(regime))}, temperature {temperature:g}</h2><p>{tally}</p>")
        parts.append(table.to_html(index=False, escape=True, na_rep=""))
    if not df.empty:
        parts.append("<h2>Speedup against acceptance</h2>" + figure(df))
    parts.append(
        f"<p><small>Reproduce the tables: <code>greenspec export --experiment {html.escape(name)} "
        "--format csv</code>.</small></p>"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>greenspec: {html.escape(name)}</title>"
        f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )


def write_report(results: Results, experiment: str | None, out: Path, force: bool = False) -> Path:
    """Write `out` (refusing to replace a file unless `force`, and never a database); its path."""
    check_out_path(str(out), "--out", force)
    df = results.results(experiment)
    name = experiment or (str(df["experiment"].iloc[0]) if len(df) else "no experiment")
    out.write_text(render(name, results.status(experiment), df), encoding="utf-8")
    return out
