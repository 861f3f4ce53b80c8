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
- `verdict(lo, hi, threshold, side)`: "holds", "does not hold" or "inconclusive" (`analysis.checks.rules` adds
  margins, "tie" and p-values for the families' correction).

Intervals are 95% BCa intervals (bias-corrected and accelerated, Efron 1987) wherever the statistic is a ratio of
sums: the percentiles read are moved by the share of resamples below the estimate (bias) and by the skew of the
leave-one-prompt-out estimates (acceleration), which keeps a skewed ratio's interval honest at 20 prompts where the
plain percentile interval under-covers; a figure given only as resamples (`interval`, e.g. a fitted slope) keeps
the percentile interval. A resample whose statistic is undefined (every drawn denominator 0) is left out of the
percentiles. Fewer than `MIN_PROMPTS` prompts give a NaN interval (one prompt says nothing about the spread over
prompts), and a NaN bound is always inconclusive; a verdict further needs `MIN_VERDICT_PROMPTS` prompts
(`analysis.checks.rules`): below them the figure is shown, marked "too few prompts".

Example:
    >>> e = ratio_of_sums(np.array([3, 1]), np.array([4, 4]))  # acceptance of two prompts
    >>> e.value, e.n
    (0.5, 2)
    >>> verdict(1.1, 1.4, 1.0, ">")
    'holds'
"""

from __future__ import annotations

from functools import lru_cache
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

RESAMPLES = 2000
SEED = 20_260_101
LEVEL = 0.95
MIN_PROMPTS = 2
MIN_VERDICT_PROMPTS = 10  # no verdict is read off an interval over fewer prompts
HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
TIE = "tie"  # the whole difference within the practical margin, or the same rounds on every prompt
NOT_TESTABLE = "not testable here"  # the check would follow from how the figures were made (estimated energy)
BY_CONSTRUCTION = "by construction"  # equal by how it was computed (a replayed cell's output is the reference)
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


_NORMAL = NormalDist()
_cdf = np.vectorize(_NORMAL.cdf, otypes=[float])
_ppf = np.vectorize(_NORMAL.inv_cdf, otypes=[float])


def _bca_levels(stats: np.ndarray, values: np.ndarray, jack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two percentile levels (per column) of the BCa interval: bias z0 from the share of finite resamples below
    the estimate (ties count half), acceleration from the skew of the leave-one-out estimates `jack` (prompts x
    figures, NaN left out); a level whose formula breaks down (1 - a (z0 + z) <= 0) falls back to the percentile."""
    finite = np.isfinite(stats)
    count = np.maximum(finite.sum(axis=0), 1)
    below = (finite & (stats < values)).sum(axis=0) + 0.5 * (finite & (stats == values)).sum(axis=0)
    z0 = _ppf(np.clip(below / count, 0.5 / count, 1 - 0.5 / count))
    known = np.isfinite(jack)
    jack = np.where(known, jack, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(known, jack.sum(axis=0) / np.maximum(known.sum(axis=0), 1) - jack, 0.0)
        num, den = (d**3).sum(axis=0), 6 * (d**2).sum(axis=0) ** 1.5
        a = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    tail = (1 - LEVEL) / 2
    levels = []
    for z, fallback in ((_NORMAL.inv_cdf(tail), tail), (_NORMAL.inv_cdf(1 - tail), 1 - tail)):
        t = z0 + z
        scale = 1 - a * t
        with np.errstate(invalid="ignore", divide="ignore"):
            levels.append(np.where(scale > 0, _cdf(z0 + t / np.where(scale > 0, scale, 1)), fallback))
    return levels[0], levels[1]


def _intervals(
    stats: np.ndarray, counts: np.ndarray, values: np.ndarray | None = None, jack: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of every column of resampled statistics (resamples x figures; NaN resamples left out): BCa
    where the estimates (`values`) and their leave-one-out values (`jack`) are given, else percentile; NaN where a
    figure has fewer than MIN_PROMPTS prompts or no finite resample. np.percentile's linear method at the chosen
    levels, for all columns from one sort (a cell's figures are many; a call per figure was most of a summary's
    time)."""
    stats = np.where(np.isfinite(stats), stats, np.nan)
    ordered = np.sort(stats, axis=0)  # NaN last
    finite = np.isfinite(stats).sum(axis=0)
    tail = (1 - LEVEL) / 2
    levels = (np.full(stats.shape[1], tail), np.full(stats.shape[1], 1 - tail))
    if values is not None and jack is not None:
        levels = _bca_levels(stats, np.asarray(values, dtype=float), np.asarray(jack, dtype=float))
    bounds = []
    for q in levels:
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


def _estimate(value: float, stats: np.ndarray, n: int, jack: np.ndarray) -> Estimate:
    """The estimate on the prompts themselves and the BCa interval of its resamples (`jack`: leave-one-out values)."""
    lo, hi = _intervals(np.reshape(stats, (-1, 1)), np.array([n]), np.array([value]), np.reshape(jack, (-1, 1)))
    return Estimate(float(value), float(lo[0]), float(hi[0]), n)


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
    jack = _ratio(num.sum(axis=0) - num, den.sum(axis=0) - den)  # each prompt left out in turn
    lo, hi = _intervals(stats, counts, values, jack)
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
        out = total - cols  # each prompt left out in turn
        jack = combine(_ratio(out[:, 0], out[:, 1]), _ratio(out[:, 2], out[:, 3]))
    return _estimate(value, stats, n, jack)


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
