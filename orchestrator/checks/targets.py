"""The targets of the future-work strategies (distilled, hybrid, adaptive), checked on a results summary.

Which strategies a target compares is read off the spec, never off their names: a *distilled* strategy drafts
from a `labels = "verifier"` corpus and is compared with the strategy of the same draft and options on the
corpus-trained instance base of the same text; a *hybrid* is a strategy whose draft declares `parts` in the
draft registry, compared with the fixed-length strategies of those drafts that need no artifact it lacks (its
own instance base, the session draft); an *adaptive* strategy (`adaptive = true`) is compared with the
fixed-length strategy of the same draft, artifacts and options.

Each target is a `orchestrator.checks.check.Check` (holds / does not hold / inconclusive, read off a 95% interval
over prompts, paired where `prompts` is given), so a test, the demo and the README read the same verdicts.

Example:
    >>> [c for c in check_all(df, roles(spec), prompts) if c.verdict != "holds"]
    []
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from orchestrator.checks.check import (
    UNCACHED,
    Check,
    Side,
    best_speedup,
    best_speedup_check,
    cell_rows,
    combine,
    compare,
    ks_of,
    one_measure,
    threshold_check,
)
from orchestrator.run.spec import parse_spec
from storage import stats


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
    targets, `orchestrator.checks.trees`)."""
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
    """`distilled` has a higher acceptance than `trained` on each task it runs on, at every k and regime (the regimes
    both run in: a spec may run a strategy in some regimes only): a paired difference > 0 at each k."""
    out = []
    both = set(df.loc[df["strategy"] == distilled, "regime"]) & set(df.loc[df["strategy"] == trained, "regime"])
    for task in tasks:
        for regime in sorted(both):
            ks = sorted(set(ks_of(df, distilled, task, regime)) & set(ks_of(df, trained, task, regime)))
            verdicts, details = [], []
            for k in ks:
                v, d = compare(
                    df, prompts, Side(distilled, task, regime, (k,)), Side(trained, task, regime, (k,)), "acceptance"
                )
                verdicts.append(v)
                details.append(f"k={k}: {d}")
            verdict = combine(verdicts) if ks else stats.INCONCLUSIVE
            out.append(
                Check(f"{distilled} acceptance > {trained}", task, regime, verdict, "; ".join(details) or "missing")
            )
    return out


def hybrid_speedup(
    df: pd.DataFrame, hybrid: str, parts: tuple[str, ...], prompts: pd.DataFrame | None = None
) -> list[Check]:
    """Uncached: hybrid's best speedup >= its better part's best (paired difference >= 0); other regimes: never
    below plain (speedup >= 1 at every k)."""
    out = []
    for task in sorted(df.loc[df["strategy"] == hybrid, "task"].unique()):
        if len(cell_rows(df, hybrid, task, UNCACHED)):
            best = {p: best_speedup(df, p, task, UNCACHED) for p in parts}
            best = {p: v for p, v in best.items() if v == v}  # a part not run on this task is left out
            top = max(best, key=best.get) if best else None
            check = best_speedup_check(df, prompts, "", hybrid, top, task, UNCACHED, ">=") if top else None
            out.append(
                Check(f"{hybrid} >= better part", task, UNCACHED, check.verdict, f"{top}: {check.detail}")
                if check
                else Check(f"{hybrid} >= better part", task, UNCACHED, stats.INCONCLUSIVE, "no part ran here")
            )
        for regime in sorted(set(df["regime"]) - {UNCACHED}):
            s = cell_rows(df, hybrid, task, regime).sort_values("k")
            if len(s):
                checks = [threshold_check("", task, regime, r, "speedup", ">=", 1.0) for _, r in s.iterrows()]
                out.append(
                    Check(
                        f"{hybrid} never loses to plain",
                        task,
                        regime,
                        combine([c.verdict for c in checks]),
                        "; ".join(f"k={k}: {c.detail}" for k, c in zip(s["k"], checks)),
                    )
                )
    return out


def adaptive_speedup(df: pd.DataFrame, adaptive: str, base: str, prompts: pd.DataFrame | None = None) -> list[Check]:
    """The adaptive strategy's best speedup >= its base's at the best fixed k, per task and regime (paired
    difference >= 0)."""
    out = []
    for task, regime in sorted(set(map(tuple, one_measure(df[df["strategy"] == adaptive])[["task", "regime"]].values))):
        check = best_speedup_check(
            df, prompts, f"{adaptive} >= {base} at its best k", adaptive, base, task, regime, ">="
        )
        if check is not None:
            out.append(check)
    return out


def exact_match(df: pd.DataFrame) -> list[Check]:
    """Every strategy's output equals plain greedy (exact match 1.0) in every cell of the summary: a count, not an
    estimate, so it holds or does not."""
    df = df[df["version"] == "current"] if "version" in df else df
    bad = df[df["exact_match"] < 1.0]
    return [
        Check(
            "exact match 1.0",
            "all",
            "all",
            stats.HOLDS if bad.empty else stats.FAILS,
            f"everywhere ({len(df)} cells)" if bad.empty else ", ".join(sorted(set(bad["strategy"]))),
        )
    ]


def check_all(df: pd.DataFrame, r: Roles, prompts: pd.DataFrame | None = None) -> list[Check]:
    """Every target the roles name; `prompts` (`storage.summary.prompt_frame`) pairs the comparisons."""
    out = exact_match(df)
    for distilled, trained in r.distilled:
        out += distilled_acceptance(df, distilled, trained, r.runs_on(distilled), prompts)
    for hybrid, parts in r.hybrid:
        out += hybrid_speedup(df, hybrid, parts, prompts)
    for adaptive, base in r.adaptive:
        out += adaptive_speedup(df, adaptive, base, prompts)
    return out


def check_spec(df: pd.DataFrame, spec_toml: str, prompts: pd.DataFrame | None = None) -> list[Check]:
    """Every target of the spec a run stored (its TOML text), over that run's summary."""
    return check_all(df, roles(parse_spec(spec_toml)), prompts)
