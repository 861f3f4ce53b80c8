"""The seed paper's findings, checked on a run's summary: each one holds, does not hold or is inconclusive.

The paper (Mistral-7B verifying IGTree drafts) reports: each olifant instance base accepts most on its own domain
(the domain diagonal, Table 2); on its own domain an olifant base beats the in-session 4-gram; uncached speedups are
above 1; in the cached regime a draft breaks even near 20-25% first-token acceptance (§4.3); and uncached energy
ratios track the speedups (Table 3). `check_claims` reads them off `analysis.summary.summary_frame` (one row per
strategy x task x k x regime, each figure with its 95% interval over prompts) and, to pair comparisons prompt by
prompt, `storage.summary.prompt_frame` (`prompts`); they return `analysis.checks.check.Check` rows whose verdict is
read off an interval (`analysis.stats.verdict`), so the demo, a test and the README read the same verdicts. The
break-even and energy claims are about the line through the cells, so their intervals are bootstraps over cells.

An olifant strategy's *own domain* is the task named like its corpus (`olifant-pydoc` over corpus `pydoc`, task
`pydoc`), as in the paper's grid and the demo; strategies over a distilled corpus are not olifant bases here.

Example:
    >>> claims_table(check_claims(df, own_domains(spec), session_4gram(spec), prompts))
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np
import pandas as pd

from analysis import stats
from analysis.checks.breakeven import BREAK_EVEN, NEAR, cached_break_even, in_range  # noqa: F401 (re-exported)
from analysis.checks.check import (
    Check,
    Side,
    best_side,
    compare,
    cross_fitted,
    held_out_threshold_check,
    ks_of,
    one_measure,
    threshold_check,
)
from analysis.checks.families import holm
from analysis.checks.rules import Judgement, all_of, cell_error, margin_for

UNCACHED = "uncached"
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


BEATS_NGRAM = "olifant base beats the in-session 4-gram on its domain"  # one family over the olifant bases
UNCACHED_GAIN = "olifant base uncached speedup > 1"


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
        detail = "; ".join(f"{strategy} vs {s}: {j.detail}" for s, j in zip(others, results))
        j = all_of(results)
        out.append(Check("domain diagonal: own base accepts most", task, UNCACHED, j.verdict, detail, p=j.p))
    return out


def beats_ngram(
    df: pd.DataFrame,
    own: dict[str, str],
    ngram: str,
    prompts: pd.DataFrame | None = None,
    model_error: Mapping[str, float] | None = None,
) -> list[Check]:
    """On its own domain, an olifant base accepts more (over k) than the in-session 4-gram strategy `ngram`, and is
    faster uncached (best speedup against best speedup, beyond the speed margin): both paired differences > 0."""
    out = []
    for strategy, task in sorted(own.items(), key=lambda kv: kv[1]):
        a, b = _over_k(df, strategy, task), _over_k(df, ngram, task)
        sa, sb = best_side(df, strategy, task, UNCACHED), best_side(df, ngram, task, UNCACHED)
        target = f"{strategy} beats {ngram} on its domain"
        if not (a.ks and b.ks and sa and sb):
            out.append(Check(target, task, UNCACHED, stats.INCONCLUSIVE, "missing"))
            continue
        acc = compare(df, prompts, a, b, "acceptance")
        fitted = cross_fitted(prompts, strategy, ngram, task, UNCACHED)
        judged, paired, note = (fitted[0], fitted[1:3], fitted[3]) if fitted else (prompts, None, "")
        speed = compare(df, judged, sa, sb, "speedup", ">", model_error, paired)
        j = all_of([acc, speed])
        detail = f"acceptance {acc.detail}; speedup {speed.detail}{note}"
        out.append(Check(target, task, UNCACHED, j.verdict, detail, p=j.p, family=BEATS_NGRAM))
    return out


def uncached_speedups(
    df: pd.DataFrame,
    own: dict[str, str],
    model_error: Mapping[str, float] | None = None,
    prompts: pd.DataFrame | None = None,
) -> list[Check]:
    """Each olifant base's uncached speedup on its own domain, at its best k, is above 1: its interval against 1
    beyond the speed margin. With per-prompt figures the best k is chosen out of sample (`held_out_threshold_check`:
    the margin then holds the regime's model error); without, the cell at the best k over all prompts (its interval
    holds its band's error)."""
    out = []
    for strategy, task in sorted(own.items(), key=lambda kv: kv[1]):
        target = f"{strategy} uncached speedup > 1"
        margin = margin_for("speedup", 1.0, UNCACHED, model_error)
        held = held_out_threshold_check(df, prompts, target, strategy, task, UNCACHED, margin)
        if held is not None:
            out.append(replace(held, family=UNCACHED_GAIN))
            continue
        side = best_side(df, strategy, task, UNCACHED)
        rows = one_measure(df[(df["strategy"] == strategy) & (df["task"] == task) & (df["regime"] == UNCACHED)])
        row = rows[rows["k"] == side.ks[0]].iloc[0] if side else None
        margin = margin_for("speedup", 1.0, UNCACHED, cell_error(model_error))
        check = threshold_check(target, task, UNCACHED, row, "speedup", ">", 1.0, margin)
        detail = (f"k={side.ks[0]}: " if side else "") + check.detail
        out.append(replace(check, detail=detail, family=UNCACHED_GAIN))
    return out


def _cell_resamples(n: int) -> np.ndarray:
    """Bootstrap indices over n cells (seeded as `analysis.stats`), resamples x n."""
    rng = np.random.default_rng([stats.SEED, n, 1])
    return rng.integers(0, n, size=(stats.RESAMPLES, n))


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r along the last axis (NaN where either side is constant)."""
    xm, ym = x - x.mean(axis=-1, keepdims=True), y - y.mean(axis=-1, keepdims=True)
    flat = (np.ptp(x, axis=-1) <= 1e-12) | (np.ptp(y, axis=-1) <= 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(flat, np.nan, (xm * ym).sum(axis=-1) / np.sqrt((xm**2).sum(axis=-1) * (ym**2).sum(axis=-1)))


def _untestable_energy(cells: pd.DataFrame) -> str | None:
    """Why uncached cells' energy cannot test the claim (estimated power, or replayed: time x a power), else None."""
    source = cells["power_source"].fillna("").astype(str) if "power_source" in cells else pd.Series("", cells.index)
    measured = cells["power_measured"].fillna(False).astype(bool) if "power_measured" in cells else source.ne("")
    replayed = cells["measure"].eq("replay") if "measure" in cells else pd.Series(False, cells.index)
    if not (measured & ~source.str.contains("estimate") & ~replayed).any():
        how = "replayed (predicted time x measured mean power)" if replayed.all() else "estimated from time"
        return f"energy {how} in every one of {len(cells)} cells: its ratio follows the speedup by construction"
    return None


def energy_tracks_speedup(df: pd.DataFrame) -> Check:
    """Uncached energy ratios (plain J / strategy J) follow the speedups: correlated (Pearson r > 0.9) and close in
    size (median |energy ratio / speedup - 1| < 10%), both read off 95% intervals of a bootstrap over the timed
    cells with measured power; "not testable here" where energy is estimated or replayed."""
    target = "uncached energy ratio tracks speedup"
    rows = df[df["version"] == "current"] if "version" in df else df
    drafted = rows[(rows["regime"] == UNCACHED) & (rows["k"] > 0)].dropna(subset=["energy_ratio", "speedup"])
    if len(drafted) and (why := _untestable_energy(drafted)):
        return Check(target, "all", UNCACHED, stats.NOT_TESTABLE, why)
    if "measure" in drafted:
        drafted = drafted[drafted["measure"] != "replay"]
    if "power_measured" in drafted:
        drafted = drafted[drafted["power_measured"].fillna(False).astype(bool)]
    pts = drafted[["energy_ratio", "speedup"]]
    if len(pts) < 3:
        return Check(target, "all", UNCACHED, stats.INCONCLUSIVE, "too few timed cells with measured energy")
    e, s = pts["energy_ratio"].to_numpy(float), pts["speedup"].to_numpy(float)
    idx = _cell_resamples(len(e))
    rs, devs = _pearson(e[idx], s[idx]), np.median(np.abs(e[idx] / s[idx] - 1), axis=1)
    r_lo, r_hi = np.percentile(rs[np.isfinite(rs)], [2.5, 97.5]) if np.isfinite(rs).any() else (np.nan, np.nan)
    d_lo, d_hi = np.percentile(devs, [2.5, 97.5])
    r, dev = float(_pearson(e, s)), float(np.median(np.abs(e / s - 1)))
    j = all_of([judge_bounds(r_lo, r_hi, TRACKS_R, ">"), judge_bounds(d_lo, d_hi, TRACKS_DEV, "<")])
    return Check(
        target,
        "all",
        UNCACHED,
        j.verdict,
        f"Pearson r {r:.3f} [{r_lo:.3f}, {r_hi:.3f}], median |energy ratio / speedup - 1| {dev:.1%} "
        f"[{d_lo:.1%}, {d_hi:.1%}] over {len(pts)} timed cells (measured power)",
    )


def judge_bounds(lo: float, hi: float, at: float, side: str) -> Judgement:
    """A verdict read off bare bounds (a figure over cells: no prompts, no margin), p not known."""
    return Judgement(stats.verdict(lo, hi, at, side), float("nan"))


def check_claims(
    df: pd.DataFrame,
    own: dict[str, str],
    ngram: str | None = None,
    prompts: pd.DataFrame | None = None,
    model_error: Mapping[str, float] | None = None,
) -> list[Check]:
    """Every claim of the paper this run can check, each family Holm-corrected: the olifant claims need olifant bases
    (`own`, from `own_domains`), the comparison with the in-session 4-gram its strategy (`ngram`, from
    `session_4gram`); `prompts` (`storage.summary.prompt_frame`) pairs the comparisons prompt by prompt and gives
    the break-even its interval; `model_error` ({regime: relative error of replayed speeds}) widens the speed
    margins and the break-even's interval."""
    out = domain_diagonal(df, own, prompts) if len(own) > 1 else []
    if ngram is not None:
        out += beats_ngram(df, own, ngram, prompts, model_error)
    out += uncached_speedups(df, own, model_error, prompts)
    out += [cached_break_even(df, prompts, float((model_error or {}).get("cached", 0.0))), energy_tracks_speedup(df)]
    return holm(out)


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
