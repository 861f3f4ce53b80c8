"""Seeded bootstrap intervals over prompts and the three-valued verdict; pure numpy, no SQL.

The prompt is the unit of sampling: a resample draws n prompts with replacement from a cell's n, so every figure of
the cell is recomputed from the drawn prompts' per-generation numbers. Each statistic here is a ratio of two
weighted sums over prompts (a mean is a ratio over a count), so a resample is a row of draw counts (`weights`,
shape resamples x n) and every statistic of every resample is two matrix products, never a Python loop over
resamples. The draws depend only on n and the seed, so an interval is the same on every machine and every run, and
two cells of the same size are resampled alike.

- `ratio_of_sums(num, den)`: sum num / sum den (acceptance = accepted / drafted, MAL = accepted / rounds,
  first-token acceptance = first accepted / first drafted; and pooled tokens/s).
- `mean_rate(x)`: the mean of a per-prompt rate (tokens/s, J per 100 tokens); NaN prompts are left out.
- `paired_ratio(strategy, plain)`: mean strategy / mean plain over the same resampled prompts (speedup; the energy
  ratio is `paired_ratio(plain J/100, strategy J/100)`, plain over the strategy, higher is better).
- `paired_difference(a_num, a_den, b_num, b_den)`: sum a_num / sum a_den - sum b_num / sum b_den over the same
  resampled prompts: "A beats B" on acceptance (accepted, drafted), on a mean rate (x, 1) or on a speedup
  (A tok/s, plain tok/s, B tok/s, plain tok/s).
- `ratio_of_ratios(a_num, a_den, b_num, b_den)`: (sum a_num / sum a_den) / (sum b_num / sum b_den), paired: a
  pooled speedup. `ratios_of_sums` computes many ratios of one cell from one set of draws.
- `verdict(lo, hi, threshold, side)`: "holds", "does not hold" or "inconclusive".

Intervals are 95% percentile intervals. A resample whose statistic is undefined (every drawn denominator 0) is left
out of the percentiles. Fewer than `MIN_PROMPTS` prompts give a NaN interval (one prompt says nothing about the
spread over prompts), and a NaN bound is always inconclusive.

Example:
    >>> e = ratio_of_sums(np.array([3, 1]), np.array([4, 4]))  # acceptance of two prompts
    >>> e.value, e.n
    (0.5, 2)
    >>> verdict(1.1, 1.4, 1.0, ">")
    'holds'
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

RESAMPLES = 2000
SEED = 20_260_101
LEVEL = 0.95
MIN_PROMPTS = 2
HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
CHUNK = 50_000_000  # draws per block of resamples: bounds the memory of a cell with very many prompts


class Estimate(NamedTuple):
    """A figure over n prompts with its 95% bootstrap interval [lo, hi] (NaN where undefined)."""

    value: float
    lo: float
    hi: float
    n: int


NAN = Estimate(float("nan"), float("nan"), float("nan"), 0)


@lru_cache(maxsize=64)
def _weights(n: int, resamples: int, seed: int) -> np.ndarray:
    w = np.empty((resamples, n))
    rng = np.random.default_rng([seed, n])
    step = max(1, CHUNK // max(n, 1))
    for lo in range(0, resamples, step):
        rows = min(step, resamples - lo)
        draws = rng.integers(0, n, size=(rows, n)) + n * np.arange(rows)[:, None]
        w[lo : lo + rows] = np.bincount(draws.ravel(), minlength=rows * n).reshape(rows, n)
    w.flags.writeable = False
    return w


def weights(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """Draw counts of the bootstrap: row r says how often resample r draws each of the n prompts (each row sums to
    n). Seeded by (seed, n): the same for every cell of n prompts, on every run."""
    return _weights(int(n), int(resamples), int(seed))


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's own linear interpolation for percentiles (exact from either end), so the bounds equal np.percentile's."""
    diff = b - a
    out = a + diff * t
    return np.where(t >= 0.5, b - diff * (1 - t), out)


def _intervals(stats: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 95% percentile interval of every column of resampled statistics (resamples x figures; NaN resamples left
    out), NaN where a figure has fewer than MIN_PROMPTS prompts or no finite resample: np.percentile's linear method,
    for all columns from one sort (a cell's figures are many; a call per figure was most of a summary's time)."""
    stats = np.where(np.isfinite(stats), stats, np.nan)
    ordered = np.sort(stats, axis=0)  # NaN last
    finite = np.isfinite(stats).sum(axis=0)
    tail = (1 - LEVEL) / 2
    bounds = []
    for q in (tail, 1 - tail):
        pos = (np.maximum(finite, 1) - 1) * q
        below = np.floor(pos).astype(int)
        above = np.minimum(below + 1, np.maximum(finite - 1, 0))
        cols = np.arange(stats.shape[1])
        value = _lerp(ordered[below, cols], ordered[above, cols], pos - below)
        bounds.append(np.where((finite > 0) & (np.asarray(counts) >= MIN_PROMPTS), value, np.nan))
    return bounds[0], bounds[1]


def interval(resampled: np.ndarray, n: int) -> tuple[float, float]:
    """The 95% percentile interval of one figure's resampled statistics over n prompts (NaN resamples left out;
    NaN bounds under MIN_PROMPTS): for a figure computed from `weights(n)`'s draws, such as a fitted slope."""
    lo, hi = _intervals(np.asarray(resampled, dtype=float).reshape(len(resampled), 1), np.array([n]))
    return float(lo[0]), float(hi[0])


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1), np.nan)


def _columns(*arrays) -> tuple[np.ndarray, int]:
    cols = np.column_stack([np.asarray(a, dtype=float) for a in arrays])
    return cols, len(cols)


def _estimate(value: float, stats: np.ndarray, n: int) -> Estimate:
    """The estimate on the prompts themselves and the interval of its resamples."""
    lo, hi = interval(stats, n)
    return Estimate(float(value), lo, hi, n)


def ratios_of_sums(num, den, resamples: int = RESAMPLES, seed: int = SEED) -> list[Estimate]:
    """sum(num[:, j]) / sum(den[:, j]) for every column j of two (prompts x figures) arrays, all from one set of
    draws (one matrix product): the summary's many figures of one cell. A figure's n is its prompts with a nonzero
    denominator (a prompt that drafted nothing says nothing about acceptance)."""
    num, den = np.atleast_2d(np.asarray(num, dtype=float).T).T, np.atleast_2d(np.asarray(den, dtype=float).T).T
    n = len(num)
    if not n:
        return [NAN] * num.shape[1]
    sums = weights(n, resamples, seed) @ np.hstack([num, den])
    c = num.shape[1]
    values = _ratio(num.sum(axis=0), den.sum(axis=0))
    stats = _ratio(sums[:, :c], sums[:, c:])
    counts = (den != 0).sum(axis=0)
    lo, hi = _intervals(stats, counts)
    return [Estimate(float(values[j]), float(lo[j]), float(hi[j]), int(counts[j])) for j in range(c)]


def ratio_of_sums(num, den, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """sum(num) / sum(den) over the prompts, with its interval; one entry per prompt."""
    return ratios_of_sums(
        np.asarray(num, dtype=float)[:, None], np.asarray(den, dtype=float)[:, None], resamples, seed
    )[0]


def mean_rate(x, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """The mean of a per-prompt rate over the prompts that have one (NaN: no round, no energy...), every prompt
    resampled: a ratio of sums of (rate, 1) over the drawn prompts with a rate."""
    x = np.asarray(x, dtype=float)
    known = np.isfinite(x)
    return ratio_of_sums(np.where(known, x, 0.0), known.astype(float), resamples, seed)


def paired_ratio(strategy, plain, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """mean(strategy) / mean(plain) over the prompts both have (entries aligned by prompt, NaN = missing)."""
    s, p = np.asarray(strategy, dtype=float), np.asarray(plain, dtype=float)
    both = np.isfinite(s) & np.isfinite(p)
    return ratio_of_sums(s[both], p[both], resamples, seed)


def _paired(a_num, a_den, b_num, b_den, resamples: int, seed: int, combine) -> Estimate:
    """combine(sum a_num / sum a_den, sum b_num / sum b_den) over the same prompts, NaN prompts left out."""
    cols, _ = _columns(a_num, a_den, b_num, b_den)
    cols = cols[np.isfinite(cols).all(axis=1)]
    n = len(cols)
    if not n:
        return NAN
    sums = weights(n, resamples, seed) @ cols
    total = cols.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = combine(_ratio(total[0], total[1]), _ratio(total[2], total[3]))
        stats = combine(_ratio(sums[:, 0], sums[:, 1]), _ratio(sums[:, 2], sums[:, 3]))
    return _estimate(value, stats, n)


def paired_difference(a_num, a_den, b_num, b_den, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """sum(a_num)/sum(a_den) - sum(b_num)/sum(b_den) over the same prompts (entries aligned by prompt; a prompt with
    any NaN is left out): the paired difference behind "A beats B"."""
    return _paired(a_num, a_den, b_num, b_den, resamples, seed, np.subtract)


def ratio_of_ratios(a_num, a_den, b_num, b_den, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """(sum a_num / sum a_den) / (sum b_num / sum b_den) over the same prompts: a pooled speedup (tokens / seconds of
    the strategy over plain's on the same prompts)."""
    return _paired(a_num, a_den, b_num, b_den, resamples, seed, lambda a, b: _ratio(a, b))


def verdict(lo: float, hi: float, threshold: float, side: str) -> str:
    """Whether a claim "figure `side` threshold" holds (side ">", ">=", "<" or "<="): "holds" when the whole interval
    [lo, hi] satisfies it, "does not hold" when the whole interval satisfies its negation, "inconclusive" otherwise
    or where a bound is NaN. So "> 1" does not hold on [0.9, 1.0], and ">= 0" holds on [0.0, 0.2]."""
    if side not in (">", ">=", "<", "<="):
        raise ValueError(f"side {side!r}: use '>', '>=', '<' or '<='")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return INCONCLUSIVE
    if side.startswith("<"):
        lo, hi, threshold = -hi, -lo, -threshold
    if lo > threshold or (side.endswith("=") and lo == threshold):
        return HOLDS
    if hi < threshold or (not side.endswith("=") and hi == threshold):
        return FAILS
    return INCONCLUSIVE
