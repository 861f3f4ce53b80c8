"""Two experiments side by side: each cell both ran (the same strategy, task, k, regime, temperature and measure)
with both figures, their 95% intervals over prompts, and B's difference from A.

What it answers: a rerun on another machine, a spec changed in one place, an experiment against its re-predicted twin
(`greenspec costs repredict`). Only cells both experiments ran are rows; how many each had alone is kept in the
frame's `attrs` (`only_a`, `only_b`). The difference is B - A of the point figures (`<figure>_diff`); `apart` says
whether the two 95% intervals miss each other (on speedup, or on acceptance where a cell has no speedup; blank where
either has no interval). Two runs' prompts are not paired, so no interval of the difference is claimed.

Example:
    >>> frame = compare_frames(export_a, export_b, "demo", "demo@laptop")
    >>> frame[["strategy", "k", "regime", "speedup_a", "speedup_b", "speedup_diff"]]
"""

from __future__ import annotations

import pandas as pd

KEYS = ("strategy", "task", "k", "regime", "temperature", "measure")
FIGURES = ("tokens_per_s", "speedup", "acceptance", "first_token_acceptance", "mal", "j_per_100_tokens", "energy_ratio")
SIDES = ("a", "b")


def _side(df: pd.DataFrame, side: str) -> pd.DataFrame:
    """One experiment's cells: its keys, prompts and each figure with its bounds, suffixed `_a` or `_b`."""
    keys = [k for k in KEYS if k in df]
    figs = [f for f in FIGURES if f in df]
    cols = ["prompts", *figs, *(f"{f}_{b}" for f in figs for b in ("lo", "hi") if f"{f}_{b}" in df)]
    out = df[keys + [c for c in cols if c in df]].copy()
    return out.rename(columns={c: _named(c, side) for c in cols})


def _named(column: str, side: str) -> str:
    """`speedup` -> `speedup_a`, `speedup_lo` -> `speedup_a_lo` (so a figure's bounds stay `<figure>_lo`)."""
    for bound in ("_lo", "_hi"):
        if column.endswith(bound):
            return f"{column.removesuffix(bound)}_{side}{bound}"
    return f"{column}_{side}"


def _apart(row: pd.Series, figure: str) -> bool | None:
    """Whether A's and B's intervals of `figure` do not overlap (None where either has none)."""
    bounds = [row.get(f"{figure}_{s}_{b}") for s in SIDES for b in ("lo", "hi")]
    if any(v is None or pd.isna(v) for v in bounds):
        return None
    a_lo, a_hi, b_lo, b_hi = bounds
    return bool(a_hi < b_lo or b_hi < a_lo)


def compare_frames(a: pd.DataFrame, b: pd.DataFrame, name_a: str, name_b: str) -> pd.DataFrame:
    """The cells both exports (`greenspec export`'s frames) hold, side by side (module doc)."""
    keys = [k for k in KEYS if k in a and k in b]
    left, right = _side(a, "a"), _side(b, "b")
    both = left.merge(right, on=keys, how="inner")
    for f in FIGURES:
        if f"{f}_a" in both and f"{f}_b" in both:
            both[f"{f}_diff"] = both[f"{f}_b"] - both[f"{f}_a"]
    speed = both.apply(lambda r: _apart(r, "speedup"), axis=1) if len(both) else pd.Series(dtype=object)
    accept = both.apply(lambda r: _apart(r, "acceptance"), axis=1) if len(both) else pd.Series(dtype=object)
    both["apart"] = speed.where(speed.notna(), accept) if len(both) else []
    both.insert(0, "b", name_b)
    both.insert(0, "a", name_a)
    matched = both[keys].drop_duplicates()
    both.attrs["only_a"] = len(left.merge(matched, on=keys, how="left", indicator=True).query("_merge == 'left_only'"))
    both.attrs["only_b"] = len(right.merge(matched, on=keys, how="left", indicator=True).query("_merge == 'left_only'"))
    return both.sort_values(keys, kind="stable").reset_index(drop=True)


def shown_columns(df: pd.DataFrame) -> list[str]:
    """What Markdown and LaTeX show: the keys, and per side speedup and acceptance (with intervals) and the
    differences."""
    cols = ["a", "b", *(k for k in KEYS if k in df)]
    for f in ("speedup", "acceptance", "tokens_per_s"):
        cols += [c for c in (f"{f}_a", f"{f}_b", f"{f}_diff") if c in df]
    return [*cols, "apart"]
