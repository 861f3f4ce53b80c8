"""The targets of the future-work strategies (distilled, hybrid, adaptive), checked on a results summary.

Which strategies a target compares is read off the spec, never off their names: a *distilled* strategy drafts
from a `labels = "verifier"` corpus and is compared with the strategy of the same draft and options on the
corpus-trained instance base of the same text; a *hybrid* is a strategy whose draft declares `parts` in the
draft registry, compared with the fixed-length strategies of those drafts that need no artifact it lacks (its
own instance base, the session draft); an *adaptive* strategy (`adaptive = true`) is compared with the
fixed-length strategy of the same draft, artifacts and options.

Each target is a `analysis.checks.check.Check` (holds / does not hold / tie / inconclusive, read off a 95%
interval over prompts, paired where `prompts` is given, speed beyond the practical margin of
`analysis.checks.rules`), judged per k where it is about every k, and each target's verdicts over tasks x
regimes x k are one family corrected by Holm's step-down (`analysis.checks.families`), so a test, the demo and
the README read the same verdicts. Exact match is tested on timed cells only: a replayed cell's output is the
stored reference by construction.

Example:
    >>> [c for c in check_all(df, roles(spec), prompts) if c.verdict != "holds"]
    []
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import pandas as pd

from analysis import stats
from analysis.checks.check import (
    UNCACHED,
    Check,
    Side,
    best_speedup,
    best_speedup_check,
    cell_rows,
    compare,
    ks_of,
    one_measure,
    threshold_check,
)
from analysis.checks.families import holm
from analysis.checks.rules import cell_error, margin_for


@dataclass(frozen=True)
class Roles:
    """The strategies each target compares, by strategy name, read off a spec (see `roles`)."""

    distilled: tuple[tuple[str, str], ...] = ()  # (distilled strategy, its corpus-trained counterpart)
    hybrid: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (hybrid strategy, its parts' strategies)
    adaptive: tuple[tuple[str, str], ...] = ()  # (adaptive strategy, its fixed-length base)
    tasks: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (strategy, the tasks it runs on)

    def runs_on(self, strategy: str) -> tuple[str, ...]:
        """The tasks `strategy` runs on."""
        return dict(self.tasks).get(strategy, ())


def requirements(strategy) -> frozenset:
    """The artifacts a strategy's draft needs, as (role, artifact, corpus) triples."""
    return frozenset((role, r.artifact, r.corpus) for role, r in strategy.options.requires().items())


def _fixed(strategy) -> bool:
    """Whether a strategy drafts a fixed k tokens (no adaptive length; token trees and k = "auto" have their own
    targets, `analysis.checks.trees`)."""
    opts = strategy.options
    return not (getattr(opts, "adaptive", False) or getattr(opts, "auto", False) or getattr(opts, "tree", None))


def _identity(strategy) -> dict:
    """The options that change proposals, adaptive keys left out."""
    return {key: v for key, v in strategy.options.identity().items() if key not in ("adaptive", "threshold", "online")}


def _same_proposals(adaptive, fixed) -> bool:
    """Whether `fixed` drafts what `adaptive` would without its stop rule: the same options, where `confidence`
    counts only if the fixed draft's identity has it (an adaptive draft's identity names how it scores its
    guesses even where, at fixed length, the score changes nothing)."""
    mine, theirs = _identity(adaptive), _identity(fixed)
    if "confidence" not in theirs:
        mine.pop("confidence", None)
    return mine == theirs


def _same_text(spec, distilled: str, trained: str) -> bool:
    """Whether corpus `trained` is the corpus-trained instance base of the text `distilled` relabels."""
    d, t = spec.corpus(distilled), spec.corpus(trained)
    return d.distilled and not t.distilled and d.path == t.path


def _counterpart(spec, s) -> str | None:
    """The fixed-length strategy of s's draft and options over the corpus-trained twin of its distilled corpora."""
    mine = sorted(requirements(s))
    for t in spec.strategies:
        theirs = sorted(requirements(t))
        if (
            t.draft == s.draft
            and _fixed(t)
            and _identity(t) == _identity(s)
            and len(theirs) == len(mine)
            and all(a[:2] == b[:2] and _same_text(spec, a[2], b[2]) for a, b in zip(mine, theirs))
        ):
            return t.name
    return None


def roles(spec) -> Roles:
    """Which strategies each target compares in a validated spec (`orchestrator.run.spec.Spec`)."""
    distilled, hybrid, adaptive = [], [], []
    for s in spec.strategies:
        corpora = {r[2] for r in requirements(s)}
        if _fixed(s) and corpora and all(spec.corpus(c).distilled for c in corpora):
            if (twin := _counterpart(spec, s)) is not None:
                distilled.append((s.name, twin))
        if _fixed(s) and s.entry.parts:
            parts = tuple(
                t.name
                for t in spec.strategies
                if t.draft in s.entry.parts and _fixed(t) and requirements(t) <= requirements(s)
            )
            hybrid.append((s.name, parts))
        if getattr(s.options, "adaptive", False):
            base = [
                t.name
                for t in spec.strategies
                if t.draft == s.draft and _fixed(t) and requirements(t) == requirements(s) and _same_proposals(s, t)
            ]
            adaptive += [(s.name, b) for b in base[:1]]
    tasks = tuple((s.name, tuple(t.name for t in spec.tasks if s.runs_on(t.name))) for s in spec.strategies)
    return Roles(tuple(distilled), tuple(hybrid), tuple(adaptive), tasks)


def distilled_acceptance(
    df: pd.DataFrame, distilled: str, trained: str, tasks: tuple[str, ...], prompts: pd.DataFrame | None = None
) -> list[Check]:
    """`distilled` has a higher acceptance than `trained` on each task it runs on, judged at each k and regime both
    ran (a spec may run a strategy in some regimes only): a paired difference > 0 per k, one family over them."""
    out = []
    target = f"{distilled} acceptance > {trained}"
    both = set(df.loc[df["strategy"] == distilled, "regime"]) & set(df.loc[df["strategy"] == trained, "regime"])
    for task in tasks:
        for regime in sorted(both):
            ks = sorted(set(ks_of(df, distilled, task, regime)) & set(ks_of(df, trained, task, regime)))
            for k in ks:
                j = compare(
                    df, prompts, Side(distilled, task, regime, (k,)), Side(trained, task, regime, (k,)), "acceptance"
                )
                out.append(Check(target, task, regime, j.verdict, f"k={k}: {j.detail}", j.figure, k=k, p=j.p))
            if not ks:
                out.append(Check(target, task, regime, stats.INCONCLUSIVE, "missing"))
    return out


def hybrid_speedup(
    df: pd.DataFrame,
    hybrid: str,
    parts: tuple[str, ...],
    prompts: pd.DataFrame | None = None,
    model_error: Mapping[str, float] | None = None,
) -> list[Check]:
    """Uncached: hybrid's best speedup >= its better part's best (paired difference >= 0 beyond the margin); other
    regimes: never below plain (speedup >= 1 beyond the margin), judged at each k."""
    out = []
    for task in sorted(df.loc[df["strategy"] == hybrid, "task"].unique()):
        if len(cell_rows(df, hybrid, task, UNCACHED)):
            best = {p: best_speedup(df, p, task, UNCACHED) for p in parts}
            best = {p: v for p, v in best.items() if v == v}  # a part not run on this task is left out
            top = max(best, key=best.get) if best else None
            check = best_speedup_check(df, prompts, "", hybrid, top, task, UNCACHED, ">=", model_error) if top else None
            out.append(
                Check(f"{hybrid} >= better part", task, UNCACHED, check.verdict, f"{top}: {check.detail}", p=check.p)
                if check
                else Check(f"{hybrid} >= better part", task, UNCACHED, stats.INCONCLUSIVE, "no part ran here")
            )
        for regime in sorted(set(df["regime"]) - {UNCACHED}):
            margin = margin_for("speedup", 1.0, regime, cell_error(model_error))
            for _, r in cell_rows(df, hybrid, task, regime).sort_values("k").iterrows():
                c = threshold_check(f"{hybrid} never loses to plain", task, regime, r, "speedup", ">=", 1.0, margin)
                out.append(replace(c, detail=f"k={c.k}: {c.detail}"))
    return out


def adaptive_speedup(
    df: pd.DataFrame,
    adaptive: str,
    base: str,
    prompts: pd.DataFrame | None = None,
    model_error: Mapping[str, float] | None = None,
) -> list[Check]:
    """The adaptive strategy's best speedup >= its base's at the best fixed k, per task and regime (paired
    difference >= 0 beyond the margin; equal rounds are a tie)."""
    out = []
    for task, regime in sorted(set(map(tuple, one_measure(df[df["strategy"] == adaptive])[["task", "regime"]].values))):
        check = best_speedup_check(
            df, prompts, f"{adaptive} >= {base} at its best k", adaptive, base, task, regime, ">=", model_error
        )
        if check is not None:
            out.append(check)
    return out


def exact_match(df: pd.DataFrame) -> list[Check]:
    """Every strategy's output equals plain greedy (exact match 1.0) in every timed cell of the summary: a count, not
    an estimate, so it holds or does not; replayed cells emit the stored reference by construction and test nothing."""
    df = df[df["version"] == "current"] if "version" in df else df
    replayed = df[df["measure"] == "replay"] if "measure" in df else df.iloc[:0]
    timed = df.drop(replayed.index)
    also = f"; {len(replayed)} replayed cells equal by construction" if len(replayed) else ""
    if timed.empty:
        return [Check("exact match 1.0", "all", "all", stats.BY_CONSTRUCTION, f"no timed cell{also}")]
    bad = timed[timed["exact_match"] < 1.0]
    return [
        Check(
            "exact match 1.0",
            "all",
            "all",
            stats.HOLDS if bad.empty else stats.FAILS,
            (f"every timed cell ({len(timed)})" if bad.empty else ", ".join(sorted(set(bad["strategy"])))) + also,
        )
    ]


def check_all(
    df: pd.DataFrame, r: Roles, prompts: pd.DataFrame | None = None, model_error: Mapping[str, float] | None = None
) -> list[Check]:
    """Every target the roles name, each family Holm-corrected; `prompts` (`storage.summary.prompt_frame`) pairs
    the comparisons, `model_error` ({regime: relative error of replayed speeds}) widens the speed margins."""
    out = exact_match(df)
    for distilled, trained in r.distilled:
        out += distilled_acceptance(df, distilled, trained, r.runs_on(distilled), prompts)
    for hybrid, parts in r.hybrid:
        out += hybrid_speedup(df, hybrid, parts, prompts, model_error)
    for adaptive, base in r.adaptive:
        out += adaptive_speedup(df, adaptive, base, prompts, model_error)
    return holm(out)
