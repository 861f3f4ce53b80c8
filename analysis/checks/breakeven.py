"""The cached break-even: where cached speedup crosses 1 as a function of first-token acceptance, near the paper's
20-25%?

The line is a least-squares fit over every drafted cached cell (strategy x task x k). Its interval resamples the
unit that was sampled, the prompt, within each task: one seeded draw of a task's prompts per resample (each task
its own seed), every cell of that task recomputed from the drawn prompts (its speedup over plain on the same drawn
prompts, its mean first-token acceptance), the line refitted and its crossing found. The cells share prompts and
plain's denominators, so they are not independent units: a bootstrap over cells calls the crossing surer than it is
(on the demo's 181 cells, [0.11, 0.15] against [0.095, 0.186] over prompts).

`model_error` is the seam for the validated prediction error of replayed cached speeds (relative, e.g. 0.023): the
crossing's interval becomes the union of the intervals with every speedup scaled by 1 - e and 1 + e.

Example:
    >>> cached_break_even(df, prompts).detail
    'line crosses 1.0 at 0.20 [0.17, 0.24] (speedup = 0.60 + 2.00 x acceptance; interval over 20 prompts ...'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis import stats
from analysis.checks.check import Check, combine, one_measure
from analysis.checks.rules import TOO_FEW

CACHED = "cached"
BREAK_EVEN = (0.20, 0.25)  # the paper's cached break-even, first-token acceptance
NEAR = 0.05  # "near": within 5 points of that range
TARGET = "cached break-even near 20-25% first-token acceptance"
CELL_KEYS = ("strategy", "task", "k", "regime", "temperature")


@dataclass(frozen=True)
class Draws:
    """Every cached drafted cell's first-token acceptance (x) and speedup (y) on each resample of the prompts
    (resamples x cells), and the fewest prompts of a task."""

    x: np.ndarray
    y: np.ndarray
    fewest: int


def _cell_sums(cell: pd.DataFrame) -> np.ndarray:
    """Per prompt of a cell: first-token acceptance (rate, known) and speedup's (tok/s, plain tok/s) where paired."""
    f = lambda c: cell[c].to_numpy(float)  # noqa: E731
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where((f("drafted") > 0) & (f("first_drafted") > 0), f("first_accepted") / f("first_drafted"), np.nan)
    paired = np.isfinite(f("plain_tokens_per_s")) & np.isfinite(f("tokens_per_s"))
    known = np.isfinite(rate)
    return np.column_stack(
        [
            np.where(known, rate, 0),
            known,
            np.where(paired, f("tokens_per_s"), 0),
            np.where(paired, f("plain_tokens_per_s"), 0),
        ]
    )


def resample_cells(prompts: pd.DataFrame) -> Draws | None:
    """Each task's prompts drawn (seeded per task), every cached drafted cell recomputed from the drawn prompts."""
    g = one_measure(prompts)
    g = g[(g["regime"] == CACHED) & (g["k"] > 0)]
    if g.empty:
        return None
    keys = [c for c in CELL_KEYS if c in g]
    xs, ys, fewest = [], [], None
    for t, (_, part) in enumerate(g.groupby("task", sort=True)):
        pairs = {p: i for i, p in enumerate(sorted(part["pair"].unique()))}
        w = stats.weights(len(pairs), seed=stats.SEED + 1 + t)
        fewest = len(pairs) if fewest is None else min(fewest, len(pairs))
        for _, cell in part.groupby(keys, sort=True, dropna=False):
            sums = w[:, cell["pair"].map(pairs).to_numpy()] @ _cell_sums(cell)
            with np.errstate(divide="ignore", invalid="ignore"):
                xs.append(np.where(sums[:, 1] > 0, sums[:, 0] / sums[:, 1], np.nan))
                ys.append(np.where(sums[:, 3] > 0, sums[:, 2] / sums[:, 3], np.nan))
    return Draws(np.column_stack(xs), np.column_stack(ys), int(fewest))


def crossings(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of (resamples x cells) x and y, cells with a NaN left out: the least-squares line's slope and where it
    crosses y = 1 (NaN for a row with one acceptance only, or a line that does not rise)."""
    ok = np.isfinite(x) & np.isfinite(y)
    count = np.maximum(ok.sum(axis=1, keepdims=True), 1)
    x0, y0 = np.where(ok, x, 0.0), np.where(ok, y, 0.0)
    xm, ym = x0.sum(axis=1, keepdims=True) / count, y0.sum(axis=1, keepdims=True) / count
    dx, dy = np.where(ok, x0 - xm, 0.0), np.where(ok, y0 - ym, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sxx = (dx**2).sum(axis=1)
        slope = np.where(sxx > 1e-12, (dx * dy).sum(axis=1) / sxx, np.nan)
        cross = xm[:, 0] + (1 - ym[:, 0]) / slope
    return slope, np.where(slope > 0, cross, np.nan)


def in_range(lo: float, hi: float, low: float, high: float) -> str:
    """Whether an interval lies within [low, high]: holds when wholly inside, does not hold when wholly outside."""
    return combine([stats.verdict(lo, hi, low, ">="), stats.verdict(lo, hi, high, "<=")])


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    return tuple(np.percentile(finite, [2.5, 97.5])) if len(finite) else (np.nan, np.nan)


def _interval(draws: Draws, model_error: float) -> tuple[str, float, float]:
    """Whether the line rises over the resamples, and the crossing's interval (widened by the model error)."""
    scales = (1.0,) if not model_error else (1.0 - model_error, 1.0 + model_error)
    rising, lo, hi = stats.HOLDS, np.inf, -np.inf
    for s in scales:
        slopes, cross = crossings(draws.x, draws.y * s)
        rising = combine([rising, stats.verdict(*_percentiles(slopes), 0.0, ">")])
        a, b = _percentiles(cross)
        lo, hi = min(lo, a), max(hi, b)
    return rising, float(lo), float(hi)


def _seen(pts: pd.DataFrame) -> str:
    above = pts[pts["speedup"] >= 1]
    if not len(above):
        return f"; none of {len(pts)} cells reached 1"
    low = above["first_token_acceptance"].min()
    return f"; {len(above)} of {len(pts)} cells at speedup >= 1, the lowest first-token acceptance among them {low:.2f}"


def cached_break_even(df: pd.DataFrame, prompts: pd.DataFrame | None = None, model_error: float = 0.0) -> Check:
    """The crossing's 95% interval over prompts (module doc) within 15-30%: holds; wholly outside: does not hold; a
    line that does not rise: does not hold. Without `prompts` there is no interval: inconclusive."""
    rows = one_measure(df)
    pts = rows[(rows["regime"] == CACHED) & (rows["k"] > 0)][["first_token_acceptance", "speedup"]].dropna()
    if len(pts) < 3 or pts["first_token_acceptance"].nunique() < 2:
        return Check(TARGET, "all", CACHED, stats.INCONCLUSIVE, "too few cells")
    x, y = pts["first_token_acceptance"].to_numpy(float), pts["speedup"].to_numpy(float)
    slope, intercept = np.polyfit(x, y, 1)
    span = f"first-token acceptance {x.min():.2f}-{x.max():.2f}{_seen(pts)}"
    draws = resample_cells(prompts) if prompts is not None else None
    if draws is None:
        why = "no per-prompt data: its interval resamples prompts"
        return Check(TARGET, "all", CACHED, stats.INCONCLUSIVE, f"{why}; {span}")
    rising, lo, hi = _interval(draws, model_error)
    if slope <= 0 or rising == stats.FAILS:
        detail = f"speedup does not rise with acceptance (slope {slope:.2f}); {span}"
        return Check(TARGET, "all", CACHED, stats.FAILS, detail)
    few = draws.fewest < stats.MIN_VERDICT_PROMPTS
    if rising != stats.HOLDS or few:
        lo, hi = np.nan, np.nan
    verdict = in_range(lo, hi, BREAK_EVEN[0] - NEAR, BREAK_EVEN[1] + NEAR)
    bounds = f"[{TOO_FEW}]" if few else f"[{lo:.2f}, {hi:.2f}]"
    error = f", model error +-{model_error:.1%}" if model_error else ""
    return Check(
        TARGET,
        "all",
        CACHED,
        verdict,
        f"line crosses 1.0 at {(1 - intercept) / slope:.2f} {bounds} (speedup = {intercept:.2f} + {slope:.2f} x "
        f"acceptance; interval over prompts within each task, at least {draws.fewest} a task, every one of "
        f"{len(x)} cells recomputed{error}); {span}",
    )
