"""How a verdict is read off an estimate: practical margins, ties, too few prompts, and each verdict's p-value.

- **Too few prompts.** No verdict under `analysis.stats.MIN_VERDICT_PROMPTS` (10) prompts: the figure is shown,
  marked "too few prompts", and the verdict is inconclusive.
- **Margins.** A speed comparison ("A beats B", "A >= B", "speedup > 1") needs a difference beyond a practical
  margin: `PRACTICAL_MARGIN` (2%) of the reference figure (B's speedup, or 1 against plain), plus the regime's
  model error where one is passed in (`model_error`: {regime: relative error of replayed speeds}; none by default,
  the seam for the validated prediction error). Exact figures (acceptance, tokens per pass) keep a zero margin.
- **Ties.** A difference whose whole interval lies within +-margin is a *tie* (with a zero margin: exactly zero on
  every resample), and so is a speed comparison of two cells that made the same rounds on every prompt.
- **Sides.** ">" (beats): holds when the interval lies above +margin, does not hold when it lies at or below +margin.
  ">=" (not slower by more than the margin): holds when the interval lies at or above -margin and is no tie, does
  not hold when it lies below -margin. A ">=" that holds is never printed as "beats".
- **p-values.** Each decisive verdict carries the one-sided p of the bound it passed (for a tie, the larger of its
  two), read off its interval: the normal tail with each half of the interval as its own 1.96 standard errors, so
  p < 2.5% exactly where the 95% interval decides. The families' correction (`analysis.checks.families`) reads
  them.

Example:
    >>> judge(stats.Estimate(0.0024, 0.0003, 0.0048, 20), 0.0, ">=", margin=0.02).verdict  # +0.24% of 1.0x
    'tie'
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Mapping, NamedTuple

from analysis import stats

PRACTICAL_MARGIN = 0.02  # a speed difference under 2% of the reference is no practical difference
ALPHA = (1 - stats.LEVEL) / 2  # one-sided: the 95% interval's tail on the verdict's side
Z = NormalDist().inv_cdf(1 - ALPHA)
EXACT = ("acceptance", "first_token_acceptance", "mean_accepted_tokens", "mal")  # timing-free: zero margin
TOO_FEW = "too few prompts"


class Judgement(NamedTuple):
    """A verdict and its one-sided p-value (NaN where the verdict is inconclusive)."""

    verdict: str
    p: float


def margin_for(metric: str, reference: float, regime: str, model_error: Mapping[str, float] | None = None) -> float:
    """The practical margin of a comparison on `metric`: zero for exact figures, else (2% + the regime's model error)
    of |reference|."""
    if metric in EXACT:
        return 0.0
    ref = abs(reference) if reference == reference else 1.0
    return ref * (PRACTICAL_MARGIN + float((model_error or {}).get(regime, 0.0)))


def cell_error(model_error: Mapping[str, float] | None) -> dict[str, float]:
    """The model error a check against a fixed threshold adds: a replayed cell's own interval holds its validated
    error already (`analysis.model_error`), so only an unknown one (NaN, its verdict inconclusive) is passed on."""
    return {regime: (e if e != e else 0.0) for regime, e in (model_error or {}).items()}


def too_few(e: stats.Estimate) -> bool:
    """Whether an estimate rests on fewer prompts than a verdict needs (0: a count, or not known)."""
    return 0 < e.n < stats.MIN_VERDICT_PROMPTS


def _p(dist: float, width: float) -> float:
    """One-sided p of a bound `dist` from the estimate on a side whose interval half is `width` wide."""
    dist, width = max(dist, 0.0), max(width, 0.0)
    if width == 0:
        return 0.0 if dist > 0 else ALPHA
    return NormalDist().cdf(-Z * dist / width)


def _above(e: stats.Estimate, bound: float) -> float:
    """p of "the figure is above `bound`" (small when the interval's low end clears it)."""
    return _p(e.value - bound, e.value - e.lo)


def _below(e: stats.Estimate, bound: float) -> float:
    """p of "the figure is below `bound`"."""
    return _p(bound - e.value, e.hi - e.value)


def _mirror(e: stats.Estimate, at: float, side: str) -> tuple[stats.Estimate, float, str]:
    """A "<" or "<=" claim as its ">" / ">=" mirror image."""
    if side.startswith("<"):
        return stats.Estimate(-e.value, -e.hi, -e.lo, e.n), -at, side.replace("<", ">")
    return e, at, side


def judge(e: stats.Estimate, at: float, side: str, margin: float = 0.0) -> Judgement:
    """The verdict of "figure `side` at" beyond `margin` (module doc), and its p."""
    if side not in (">", ">=", "<", "<="):
        raise ValueError(f"side {side!r}: use '>', '>=', '<' or '<='")
    if too_few(e) or not all(x == x for x in (e.value, e.lo, e.hi)):
        return Judgement(stats.INCONCLUSIVE, float("nan"))
    e, at, side = _mirror(e, at, side)
    low, high = at - margin, at + margin
    if low <= e.lo and e.hi <= high:
        return Judgement(stats.TIE, max(_above(e, low), _below(e, high)) if margin > 0 else 0.0)
    bound = high if side == ">" else low
    if e.lo > bound or (side == ">=" and e.lo == bound):
        return Judgement(stats.HOLDS, _above(e, bound))
    if e.hi < bound or (side == ">" and e.hi == bound):
        return Judgement(stats.FAILS, _below(e, bound))
    return Judgement(stats.INCONCLUSIVE, float("nan"))


def all_of(judgements: list[Judgement]) -> Judgement:
    """All of several claims: holds when every one holds (p: the largest), does not hold when any does not (p: the
    smallest of those), a tie when the rest hold or tie and one ties, else inconclusive (and for none)."""
    verdicts = [j.verdict for j in judgements]
    failed = [j.p for j in judgements if j.verdict == stats.FAILS]
    if failed:
        return Judgement(stats.FAILS, min(failed))
    if verdicts and all(v in (stats.HOLDS, stats.TIE) for v in verdicts):
        p = max(j.p for j in judgements)
        return Judgement(stats.TIE if stats.TIE in verdicts else stats.HOLDS, p)
    return Judgement(stats.INCONCLUSIVE, float("nan"))


def bounds_text(e: stats.Estimate, fmt: str = ".2f", signed: bool = False) -> str:
    """ "[lo, hi]", "[no interval]", or "[too few prompts]" under `MIN_VERDICT_PROMPTS` prompts."""
    if too_few(e):
        return f"[{TOO_FEW}]"
    f = ("+" if signed else "") + fmt
    return f"[{e.lo:{f}}, {e.hi:{f}}]" if e.lo == e.lo else "[no interval]"
