"""The seed paper's published numbers as data, and a cell-by-cell comparison of a run with them.

`results.csv` (beside this file) transcribes every number the paper's text states for its Tables 1-7, Figures 1-2
and its §2.3 latencies, with the table, the section and the sentence it comes from. The copy of the paper in
this project (the arXiv HTML rendered as text) holds the tables' captions but not their bodies, so the numbers
are those quoted in the prose: a subset of the tables' cells. A value stated as a range ("1.48–1.53x on medical
text") is a row with `value` and `value_max`; a blank strategy, task, k or regime means "any"; `a|b|c` is a set.
Values are stored in the paper's units (% for acceptance and redundancy) and converted on load.

Example:
    >>> paper = load_results()
    >>> paper.query("strategy == 'olifant-eurlex' and metric == 'energy_ratio' and k == '8' and regime == 'uncached'")
    ...     ["value"].item()
    2.51
    >>> table = compare(summary)      # summary: one row per strategy x task x k x regime
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import pandas as pd

from analysis.columns import COMPARE_COLUMNS  # the comparison's columns, declared with the summary's
from workers.drafts.registry import lookup, names

# The paper's baselines -> the draft that reproduces each (declared in the draft registry); their greenspec names
# are read off the paper's spec (examples/paper.toml: the strategy that uses that draft). Olifant variants keep
# their names.
PAPER_DRAFTS = {entry.paper: entry.name for entry in map(lookup, names()) if entry.paper}
PAPER_SPEC = Path(__file__).resolve().parents[2] / "examples" / "paper.toml"
TASK_NAMES = {"general": "wikitext", "medical": "pubmed", "legal": "eurlex"}
UNIT_SCALE = {"%": 0.01}  # to greenspec's units: acceptance and redundancy are fractions
KEYS = ("strategy", "task", "k", "regime")


def _names(cell: str, table: Mapping[str, str]) -> str:
    """Map each `|`-separated name of a cell through `table` (blank stays blank)."""
    return "|".join(table.get(x, x) for x in cell.split("|")) if cell else ""


def strategy_names(spec_toml: str) -> dict[str, str]:
    """The paper's baseline names -> the names of the spec's strategies whose drafts reproduce them."""
    strategies = tomllib.loads(spec_toml).get("strategies", [])
    out = {}
    for paper, draft in PAPER_DRAFTS.items():
        mine = [s["name"] for s in strategies if s.get("draft") == draft]
        out.update({paper: mine[0]} if mine else {})
    return out


def load_results(names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The paper's numbers with greenspec's strategy and task names, values in greenspec's units.

    `names` maps the paper's baselines to strategy names (default: `strategy_names` of examples/paper.toml).

    Columns: source, section, regime, strategy, task, k (text: "", "8" or "12|16|24"), metric, value,
    value_max (NaN for a single value), unit (the paper's), quote, note, paper_value (as printed).
    """
    with resources.files(__package__).joinpath("results.csv").open(encoding="utf-8") as fh:
        df = pd.read_csv(fh, dtype=str, keep_default_na=False)
    scale = df["unit"].map(UNIT_SCALE).fillna(1.0)
    df["paper_value"] = df["value"]
    df["value"] = df["value"].astype(float) * scale
    df["value_max"] = pd.to_numeric(df["value_max"].replace("", math.nan)) * scale
    names = strategy_names(PAPER_SPEC.read_text()) if names is None else names
    df["strategy"] = df["strategy"].map(lambda s: _names(s, names))
    df["task"] = df["task"].map(lambda s: _names(s, TASK_NAMES))
    return df


def _key_text(value) -> str | None:
    """A run's key value as a paper cell spells it (k 8.0 -> "8"); None for a missing value, which only the paper's
    "" (any) covers."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(int(value) if isinstance(value, float) and value.is_integer() else value)


def _covering(texts: Mapping[str, pd.Series], paper_row, index: pd.Index) -> pd.Series:
    """Which run rows a paper row covers on every key: its cell is "" (any) or holds the row's value among its
    `|`-separated values. All rows at once, from their key texts."""
    mask = pd.Series(True, index=index)
    for key, text in texts.items():
        cell = getattr(paper_row, key)
        if cell:
            mask &= text.isin(cell.split("|"))
    return mask


def _key_value(value):
    """A run's key value as shown: k as an int (the frames it comes from may hold it as a float)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else ("" if math.isnan(value) else value)
    return value


def _difference(ours: float, lo: float, hi: float) -> tuple[float, float, bool | None]:
    """(ours - paper, relative to the paper, inside the range?): a range's difference is to its nearest bound."""
    if math.isnan(hi):
        d = ours - lo
        return d, d / lo if lo else math.nan, None
    ref = lo if ours < lo else min(ours, hi)
    d = ours - ref
    return d, d / ref if ref else math.nan, lo <= ours <= hi


def compare(
    run_summary: pd.DataFrame,
    paper: pd.DataFrame | None = None,
    names: Mapping[str, str] | None = None,
    keep_unmatched: bool = True,
    tasks: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The run's numbers beside the paper's, cell by cell, with differences.

    `run_summary` has some of the key columns strategy, task, k, regime and metric columns named as the
    paper's (tokens_per_s, speedup, acceptance, mal, j_per_100_tokens, energy_ratio as plain / strategy,
    tokens_per_j, mean_power_w, rouge_l, latency_ms, within_text, cross_doc, gzip_ratio). Each paper number
    is joined with every run row it covers (a key column the run lacks matches anything); `names` renames the
    run's strategies to the paper's (e.g. {"olifant-legal": "olifant-eurlex"}) and `tasks` its tasks (e.g.
    {"shakespeare": "wikitext"}), in greenspec's names for the paper's. A paper number no run row
    covers is kept with `ours` NaN when `keep_unmatched`. `in_range` is set for ranges only.
    """
    paper = load_results() if paper is None else paper
    run = run_summary.copy()
    for column, mapping in (("strategy", names), ("task", tasks)):
        if mapping and column in run:
            run[column] = run[column].map(lambda s, m=mapping: m.get(s, s))
    keys = [k for k in KEYS if k in run]
    texts = {key: run[key].map(_key_text) for key in keys}  # once: the paper has a hundred rows to match
    out = []
    for p in paper.itertuples(index=False):
        rows = run[run[p.metric].notna() & _covering(texts, p, run.index)] if p.metric in run else run.iloc[0:0]
        base = {c: getattr(p, c) for c in ("source", "section", "metric", "unit", "quote", "note")}
        base.update(paper=p.value, paper_max=p.value_max)
        read = [c for c in (*keys, p.metric) if c in rows]  # only the columns read: the summary has about 100
        for r in rows[read].itertuples(index=False):
            ours = float(getattr(r, p.metric))
            d, rel, inside = _difference(ours, p.value, p.value_max)
            cell = {k: _key_value(getattr(r, k)) if k in keys else getattr(p, k) for k in KEYS}
            out.append({**base, **cell, "ours": ours, "diff": d, "rel_diff": rel, "in_range": inside})
        if rows.empty and keep_unmatched:
            out.append(
                {
                    **base,
                    **{k: getattr(p, k) for k in KEYS},
                    "ours": math.nan,
                    "diff": math.nan,
                    "rel_diff": math.nan,
                    "in_range": None,
                }
            )
    return pd.DataFrame(out, columns=COMPARE_COLUMNS)


def latency_for_compare(latency: pd.DataFrame) -> pd.DataFrame:
    """`greenspec latency` rows (mean_us per strategy and engine) as the metric `latency_ms` compare() joins."""
    df = latency.copy()
    df["latency_ms"] = df["mean_us"] / 1000.0
    return df


def redundancy_frame(refs: pd.DataFrame, n: int = 4) -> pd.DataFrame:
    """Table 5 per task from reference continuations (columns task, tokens, text): the paper's definitions."""
    from workers.metrics import paper_redundancy

    rows = []
    for task, group in refs.groupby("task", sort=True):
        r = paper_redundancy([list(t or []) for t in group["tokens"]], [t or "" for t in group["text"]], n=n)
        rows.append(
            {
                "task": task,
                "texts": r.texts,
                "within_text": r.within_text,
                "cross_doc": r.cross_doc,
                "gzip_ratio": r.gzip_ratio,
            }
        )
    return pd.DataFrame(rows, columns=["task", "texts", "within_text", "cross_doc", "gzip_ratio"])


def run_frame(summary: pd.DataFrame, latency: pd.DataFrame, redundancy: pd.DataFrame) -> pd.DataFrame:
    """One frame compare() joins: summary rows, latency rows (latency_ms) and per-task redundancy rows."""
    parts = [summary]
    if not latency.empty:
        parts.append(latency_for_compare(latency)[["strategy", "latency_ms"]])
    if not redundancy.empty:
        parts.append(redundancy)
    return pd.concat([p for p in parts if not p.empty], ignore_index=True)


__all__ = [
    "COMPARE_COLUMNS",
    "PAPER_DRAFTS",
    "TASK_NAMES",
    "compare",
    "latency_for_compare",
    "load_results",
    "redundancy_frame",
    "run_frame",
    "strategy_names",
]
