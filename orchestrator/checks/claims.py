"""The seed paper's findings, checked on a run's summary: each one holds, does not hold or is inconclusive.

The paper (Mistral-7B verifying IGTree drafts) reports: each olifant instance base accepts most on its own domain
(the domain diagonal, Table 2); on its own domain an olifant base beats the in-session 4-gram; uncached speedups are
above 1; in the cached regime a draft breaks even near 20-25% first-token acceptance (§4.3); and uncached energy
ratios track the speedups (Table 3). `check_claims` reads them off `storage.queries.summary_frame` (one row per
strategy x task x k x regime, each figure with its 95% interval over prompts) and, to pair comparisons prompt by
prompt, `storage.summary.prompt_frame` (`prompts`); they return `orchestrator.checks.check.Check` rows whose verdict is
read off an interval (`storage.stats.verdict`), so the demo, a test and the README read the same verdicts. The
break-even and energy claims are about the line through the cells, so their intervals are bootstraps over cells.

An olifant strategy's *own domain* is the task named like its corpus (`olifant-pydoc` over corpus `pydoc`, task
`pydoc`), as in the paper's grid and the demo; strategies over a distilled corpus are not olifant bases here.

Example:
    >>> claims_table(check_claims(df, own_domains(spec), session_4gram(spec), prompts))
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.checks.check import Check, Side, best_side, combine, compare, ks_of, one_measure, threshold_check
from storage import stats

UNCACHED, CACHED = "uncached", "cached"
BREAK_EVEN = (0.20, 0.25)  # the paper's cached break-even, first-token acceptance
NEAR = 0.05  # "near": within 5 points of that range
TRACKS_R = 0.9  # energy ratios track speedups: Pearson r above this ...
TRACKS_DEV = 0.10  # ... and the median |energy ratio / speedup - 1| below this


def _instance_base_only(strategy) -> str | None:
    """The corpus of a strategy that drafts from one instance base alone at fixed length (an olifant base), else None."""
    reqs = list(strategy.options.requires().values())
    alone = len(reqs) == 1 and reqs[0].artifact == "ibase" and not strategy.entry.parts
    opts = strategy.options
    fixed = not (getattr(opts, "adaptive", False) or getattr(opts, "auto", False) or getattr(opts, "tree", None))
    return reqs[0].corpus if alone and fixed else None


def own_domains(spec) -> dict[str, str]:
    """olifant strategy -> the task of its own domain (the task named like its corpus-trained corpus)."""
    tasks = {t.name for t in spec.tasks}
    out = {}
    for s in spec.strategies:
        corpus = _instance_base_only(s)
        if corpus in tasks and not spec.corpus(corpus).distilled:
            out[s.name] = corpus
    return out


def session_4gram(spec) -> str | None:
    """The spec's first in-session 4-gram strategy: a fixed-length draft that needs no artifact, combines no other
    drafts, and has n-gram order `n = 4` (the paper's baseline); None if the spec has none."""
    for s in spec.strategies:
        if (
            s.entry.drafts
            and not s.entry.parts
            and not s.options.requires()
            and getattr(s.options, "n", None) == 4
            and not getattr(s.options, "adaptive", False)
        ):
            return s.name
    return None


def _over_k(df: pd.DataFrame, strategy: str, task: str, regime: str = UNCACHED) -> Side:
    """A strategy's acceptance over all its k on a task (their mean per prompt)."""
    return Side(strategy, task, regime, ks_of(df, strategy, task, regime))


def domain_diagonal(df: pd.DataFrame, own: dict[str, str], prompts: pd.DataFrame | None = None) -> list[Check]:
    """On each task, the olifant base of that domain accepts more (uncached, over k) than every other olifant base:
    a paired difference > 0 against each."""
    out = []
    for strategy, task in sorted(own.items(), key=lambda kv: kv[1]):
        mine = _over_k(df, strategy, task)
        others = [s for s in sorted(own) if s != strategy and ks_of(df, s, task, UNCACHED)]
        if not mine.ks or not others:
            out.append(Check("domain diagonal: own base accepts most", task, UNCACHED, stats.INCONCLUSIVE, "missing"))
            continue
        results = [compare(df, prompts, mine, _over_k(df, s, task), "acceptance") for s in others]
        detail = "; ".join(f"{strategy} vs {s}: {d}" for s, (_, d) in zip(others, results))
        verdict = combine([v for v, _ in results])
        out.append(Check("domain diagonal: own base accepts most", task, UNCACHED, verdict, detail))
    return out


def beats_ngram(df: pd.DataFrame, own: dict[str, str], ngram: str, prompts: pd.DataFrame | None = None) -> list[Check]:
    """On its own domain, an olifant base accepts more (over k) than the in-session 4-gram strategy `ngram`, and is
    faster uncached (best speedup against best speedup): both paired differences > 0."""
    out = []
    for strategy, task in sorted(own.items(), key=lambda kv: kv[1]):
        a, b = _over_k(df, strategy, task), _over_k(df, ngram, task)
        sa, sb = best_side(df, strategy, task, UNCACHED), best_side(df, ngram, task, UNCACHED)
        target = f"{strategy} beats {ngram} on its domain"
        if not (a.ks and b.ks and sa and sb):
            out.append(Check(target, task, UNCACHED, stats.INCONCLUSIVE, "missing"))
            continue
        va, da = compare(df, prompts, a, b, "acceptance")
        vs, ds = compare(df, prompts, sa, sb, "speedup")
        out.append(Check(target, task, UNCACHED, combine([va, vs]), f"acceptance {da}; speedup {ds}"))
    return out


def uncached_speedups(df: pd.DataFrame, own: dict[str, str]) -> list[Check]:
    """Each olifant base's uncached speedup on its own domain, at its best k, is above 1: its interval against 1."""
    out = []
    for strategy, task in sorted(own.items(), key=lambda kv: kv[1]):
        side = best_side(df, strategy, task, UNCACHED)
        rows = one_measure(df[(df["strategy"] == strategy) & (df["task"] == task) & (df["regime"] == UNCACHED)])
        row = rows[rows["k"] == side.ks[0]].iloc[0] if side else None
        check = threshold_check(f"{strategy} uncached speedup > 1", task, UNCACHED, row, "speedup", ">", 1.0)
        out.append(
            Check(check.target, task, UNCACHED, check.verdict, (f"k={side.ks[0]}: " if side else "") + check.detail)
        )
    return out


def _cell_resamples(n: int) -> np.ndarray:
    """Bootstrap indices over n cells (seeded as `storage.stats`), resamples x n."""
    rng = np.random.default_rng([stats.SEED, n, 1])
    return rng.integers(0, n, size=(stats.RESAMPLES, n))


def _crossings(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of (resamples x cells) x and y: the least-squares line's slope and where it crosses y = 1 (NaN for a
    resample that drew one acceptance only: no line)."""
    xm, ym = x.mean(axis=1, keepdims=True), y.mean(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = ((x - xm) * (y - ym)).sum(axis=1) / ((x - xm) ** 2).sum(axis=1)
        slope = np.where(np.ptp(x, axis=1) > 1e-12, slope, np.nan)
        cross = xm[:, 0] + (1 - ym[:, 0]) / slope
    return slope, np.where(slope > 0, cross, np.nan)


def in_range(lo: float, hi: float, low: float, high: float) -> str:
    """Whether an interval lies within [low, high]: holds when wholly inside, does not hold when wholly outside."""
    return combine([stats.verdict(lo, hi, low, ">="), stats.verdict(lo, hi, high, "<=")])


def cached_break_even(df: pd.DataFrame) -> Check:
    """Where cached speedup crosses 1 as a function of first-token acceptance (a least-squares line over every drafted
    strategy, task and k): near the paper's 20-25%, i.e. the crossing's 95% interval (a bootstrap over the cells)
    within 15-30%."""
    target = "cached break-even near 20-25% first-token acceptance"
    rows = one_measure(df)
    drafted = rows[(rows["regime"] == CACHED) & (rows["k"] > 0)]  # k = 0: plain, which drafts nothing
    pts = drafted[["first_token_acceptance", "speedup"]].dropna()
    if len(pts) < 3 or pts["first_token_acceptance"].nunique() < 2:
        return Check(target, "all", CACHED, stats.INCONCLUSIVE, "too few cells")
    x, y = pts["first_token_acceptance"].to_numpy(float), pts["speedup"].to_numpy(float)
    slope, intercept = np.polyfit(x, y, 1)
    above = pts[pts["speedup"] >= 1]
    seen = (
        f"; {len(above)} of {len(pts)} cells at speedup >= 1, the lowest first-token acceptance among them "
        f"{above['first_token_acceptance'].min():.2f}"
        if len(above)
        else f"; none of {len(pts)} cells reached 1"
    )
    span = f"first-token acceptance {x.min():.2f}-{x.max():.2f}"
    idx = _cell_resamples(len(x))
    slopes, crossings = _crossings(x[idx], y[idx])
    rising = stats.verdict(*np.percentile(slopes[np.isfinite(slopes)], [2.5, 97.5]), 0.0, ">")
    if slope <= 0 or rising == stats.FAILS:
        return Check(
            target,
            "all",
            CACHED,
            stats.FAILS,
            f"speedup does not rise with acceptance (slope {slope:.2f}); {span}{seen}",
        )
    finite = crossings[np.isfinite(crossings)]
    lo, hi = np.percentile(finite, [2.5, 97.5]) if rising == stats.HOLDS and len(finite) else (np.nan, np.nan)
    verdict = in_range(lo, hi, BREAK_EVEN[0] - NEAR, BREAK_EVEN[1] + NEAR)
    x0 = (1 - intercept) / slope
    return Check(
        target,
        "all",
        CACHED,
        verdict,
        f"line crosses 1.0 at {x0:.2f} [{lo:.2f}, {hi:.2f}] (speedup = {intercept:.2f} + {slope:.2f} x acceptance; "
        f"interval over {len(x)} cells); {span}{seen}",
    )


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r along the last axis (NaN where either side is constant)."""
    xm, ym = x - x.mean(axis=-1, keepdims=True), y - y.mean(axis=-1, keepdims=True)
    flat = (np.ptp(x, axis=-1) <= 1e-12) | (np.ptp(y, axis=-1) <= 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(flat, np.nan, (xm * ym).sum(axis=-1) / np.sqrt((xm**2).sum(axis=-1) * (ym**2).sum(axis=-1)))


def energy_tracks_speedup(df: pd.DataFrame) -> Check:
    """Uncached energy ratios (plain J / strategy J) follow the speedups: correlated (Pearson r > 0.9) and close in
    size (median |energy ratio / speedup - 1| < 10%), both read off 95% intervals of a bootstrap over cells."""
    target = "uncached energy ratio tracks speedup"
    rows = one_measure(df)
    drafted = rows[(rows["regime"] == UNCACHED) & (rows["k"] > 0)]  # k = 0: plain, which drafts nothing
    pts = drafted[["energy_ratio", "speedup"]].dropna()
    if len(pts) < 3:
        return Check(target, "all", UNCACHED, stats.INCONCLUSIVE, "too few cells with energy")
    e, s = pts["energy_ratio"].to_numpy(float), pts["speedup"].to_numpy(float)
    idx = _cell_resamples(len(e))
    rs, devs = _pearson(e[idx], s[idx]), np.median(np.abs(e[idx] / s[idx] - 1), axis=1)
    r_lo, r_hi = np.percentile(rs[np.isfinite(rs)], [2.5, 97.5]) if np.isfinite(rs).any() else (np.nan, np.nan)
    d_lo, d_hi = np.percentile(devs, [2.5, 97.5])
    r, dev = float(_pearson(e, s)), float(np.median(np.abs(e / s - 1)))
    source = (
        "measured" if "power_measured" in rows and rows["power_measured"].fillna(False).all() else "estimated power"
    )
    verdict = combine([stats.verdict(r_lo, r_hi, TRACKS_R, ">"), stats.verdict(d_lo, d_hi, TRACKS_DEV, "<")])
    return Check(
        target,
        "all",
        UNCACHED,
        verdict,
        f"Pearson r {r:.3f} [{r_lo:.3f}, {r_hi:.3f}], median |energy ratio / speedup - 1| {dev:.1%} "
        f"[{d_lo:.1%}, {d_hi:.1%}] over {len(pts)} cells ({source})",
    )


def check_claims(
    df: pd.DataFrame, own: dict[str, str], ngram: str | None = None, prompts: pd.DataFrame | None = None
) -> list[Check]:
    """Every claim of the paper this run can check: the olifant claims need olifant bases (`own`, from
    `own_domains`), the comparison with the in-session 4-gram its strategy (`ngram`, from `session_4gram`);
    `prompts` (`storage.summary.prompt_frame`) pairs the comparisons prompt by prompt."""
    out = domain_diagonal(df, own, prompts) if len(own) > 1 else []
    if ngram is not None:
        out += beats_ngram(df, own, ngram, prompts)
    return out + uncached_speedups(df, own) + [cached_break_even(df), energy_tracks_speedup(df)]


def claims_table(checks: list[Check]) -> str:
    """The verdicts as a Markdown table, each claim marked "holds", "does not hold" or "inconclusive"."""
    rows = [
        {
            "claim": c.target,
            "task": c.task,
            "regime": c.regime,
            "verdict": c.verdict,
            "numbers": c.detail,
        }
        for c in checks
    ]
    return pd.DataFrame(rows).to_markdown(index=False)
