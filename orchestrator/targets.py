"""The targets of the future-work strategies (distilled, hybrid, adaptive), checked on a results summary.

Which strategies a target compares is read off the spec, never off their names: a *distilled* strategy drafts
from a `labels = "verifier"` corpus and is compared with the strategy of the same draft and options on the
corpus-trained instance base of the same text; a *hybrid* is a strategy whose draft declares `parts` in the
draft registry, compared with the fixed-length strategies of those drafts that need no artifact it lacks (its
own instance base, the session draft); an *adaptive* strategy (`adaptive = true`) is compared with the
fixed-length strategy of the same draft, artifacts and options. Each check is then pure pandas over
`storage.queries.summary_frame` (one row per strategy x task x k x regime) and returns `Check` rows, so a test,
the demo and the README read the same verdicts. Speedups are compared within `noise` (relative): at least 5%,
and where a run measured its own timing noise (cells that made identical verifier passes), two standard errors of
a speedup ratio at that noise (`tolerance`), since tokens/s of a few short generations on a shared CPU vary.

Example:
    >>> [c for c in check_all(df, roles(spec)) if not c.ok]
    []
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

NOISE = 0.05  # relative: the least tolerance; `tolerance` widens it to what a run measured of its own noise
UNCACHED = "uncached"  # the regime where the hybrid must match its better part; elsewhere it must not lose to plain


@dataclass(frozen=True)
class Check:
    """One verdict: which target, where, whether it holds, and the numbers behind it."""

    target: str
    task: str
    regime: str
    ok: bool
    detail: str


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


def _requirements(strategy) -> frozenset:
    """The artifacts a strategy's draft needs, as (role, artifact, corpus) triples."""
    return frozenset((role, r.artifact, r.corpus) for role, r in strategy.options.requires().items())


def _fixed(strategy) -> bool:
    """Whether a strategy drafts a fixed k tokens (no adaptive length; token trees and k = "auto" have their own
    targets, `orchestrator.tree_targets`)."""
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
    mine = sorted(_requirements(s))
    for t in spec.strategies:
        theirs = sorted(_requirements(t))
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
    """Which strategies each target compares in a validated spec (`orchestrator.spec.Spec`)."""
    distilled, hybrid, adaptive = [], [], []
    for s in spec.strategies:
        corpora = {r[2] for r in _requirements(s)}
        if _fixed(s) and corpora and all(spec.corpus(c).distilled for c in corpora):
            if (twin := _counterpart(spec, s)) is not None:
                distilled.append((s.name, twin))
        if _fixed(s) and s.entry.parts:
            parts = tuple(
                t.name
                for t in spec.strategies
                if t.draft in s.entry.parts and _fixed(t) and _requirements(t) <= _requirements(s)
            )
            hybrid.append((s.name, parts))
        if getattr(s.options, "adaptive", False):
            base = [
                t.name
                for t in spec.strategies
                if t.draft == s.draft and _fixed(t) and _requirements(t) == _requirements(s) and _same_proposals(s, t)
            ]
            adaptive += [(s.name, b) for b in base[:1]]
    tasks = tuple((s.name, tuple(t.name for t in spec.tasks if s.runs_on(t.name))) for s in spec.strategies)
    return Roles(tuple(distilled), tuple(hybrid), tuple(adaptive), tasks)


def _rows(df: pd.DataFrame, strategy: str, task: str, regime: str) -> pd.DataFrame:
    return df[(df["strategy"] == strategy) & (df["task"] == task) & (df["regime"] == regime)]


def distilled_acceptance(df: pd.DataFrame, distilled: str, trained: str, tasks: tuple[str, ...]) -> list[Check]:
    """`distilled` has a higher acceptance than `trained` on each task it runs on, at every k and regime (the regimes
    both run in: a spec may run a strategy in some regimes only)."""
    out = []
    both = set(df.loc[df["strategy"] == distilled, "regime"]) & set(df.loc[df["strategy"] == trained, "regime"])
    for task in tasks:
        for regime in sorted(both):
            d = _rows(df, distilled, task, regime).set_index("k")["acceptance"]
            o = _rows(df, trained, task, regime).set_index("k")["acceptance"]
            ks = sorted(set(d.index) & set(o.index))
            ok = bool(ks) and all(d[k] > o[k] for k in ks)
            detail = ", ".join(f"k={k}: {d[k]:.2f} vs {o[k]:.2f}" for k in ks) or "missing"
            out.append(Check(f"{distilled} acceptance > {trained}", task, regime, ok, detail))
    return out


def _best(df: pd.DataFrame, strategy: str, task: str, regime: str) -> float:
    s = _rows(df, strategy, task, regime)["speedup"]
    return float(s.max()) if len(s) else float("nan")


def _passes(df: pd.DataFrame, strategies: tuple[str, str], task: str, regime: str) -> str:
    """ "; tokens/pass a vs b" at each one's best speedup: timing-free, so a speedup gap between equal figures
    is the machine's noise ("" without the column)."""
    if "mean_accepted_tokens" not in df:
        return ""
    vals = []
    for s in strategies:
        rows = _rows(df, s, task, regime)
        if not len(rows):
            return ""
        vals.append(float(rows.loc[rows["speedup"].idxmax(), "mean_accepted_tokens"]))
    return f"; tokens/pass {vals[0]:.2f} vs {vals[1]:.2f}"


def hybrid_speedup(df: pd.DataFrame, hybrid: str, parts: tuple[str, ...], noise: float = NOISE) -> list[Check]:
    """Uncached: hybrid's best speedup >= its better part's best (within noise); other regimes: never below plain."""
    out = []
    for task in sorted(df.loc[df["strategy"] == hybrid, "task"].unique()):
        if len(_rows(df, hybrid, task, UNCACHED)):
            h = _best(df, hybrid, task, UNCACHED)
            best = {p: _best(df, p, task, UNCACHED) for p in parts}
            best = {p: v for p, v in best.items() if v == v}  # a part not run on this task is left out
            top = max(best, key=best.get) if best else "no part"
            ok = bool(best) and h >= best[top] * (1 - noise)
            out.append(
                Check(
                    f"{hybrid} >= better part",
                    task,
                    UNCACHED,
                    ok,
                    f"{h:.2f} vs {top} {best.get(top, float('nan')):.2f}"
                    + (_passes(df, (hybrid, top), task, UNCACHED) if best else ""),
                )
            )
        for regime in sorted(set(df["regime"]) - {UNCACHED}):
            s = _rows(df, hybrid, task, regime).sort_values("k")
            if len(s):
                out.append(
                    Check(
                        f"{hybrid} never loses to plain",
                        task,
                        regime,
                        bool((s["speedup"] >= 1 - noise).all()),
                        ", ".join(f"k={k}: {v:.2f}" for k, v in zip(s["k"], s["speedup"])),
                    )
                )
    return out


def adaptive_speedup(df: pd.DataFrame, adaptive: str, base: str, noise: float = NOISE) -> list[Check]:
    """The adaptive strategy's speedup >= its base's at the best fixed k, per task and regime (within noise)."""
    out = []
    for (task, regime), part in df[df["strategy"] == adaptive].groupby(["task", "regime"]):
        a = float(part["speedup"].max())
        fixed = _rows(df, base, task, regime)
        b = _best(df, base, task, regime)
        k = int(fixed.loc[fixed["speedup"].idxmax(), "k"]) if len(fixed) else None
        out.append(
            Check(
                f"{adaptive} >= {base} at its best k",
                task,
                regime,
                bool(a >= b * (1 - noise)),
                f"{a:.2f} vs {b:.2f} (k={k})" + _passes(df, (adaptive, base), task, regime),
            )
        )
    return out


def tolerance(sd: float | None, prompts: int, floor: float = NOISE) -> float:
    """How far apart two speedups may be and still count as equal: two standard errors of the ratio of two
    strategies' summed times over `prompts` prompts, each generation's time off by `sd` (relative, measured by
    `storage.queries.identical_pass_noise`), i.e. 2 sd sqrt(2 / prompts); never below `floor`."""
    if sd is None or prompts < 1:
        return floor
    return max(floor, 2 * sd * math.sqrt(2 / prompts))


def exact_match(df: pd.DataFrame) -> list[Check]:
    """Every strategy's output equals plain greedy (exact match 1.0) in every cell of the summary."""
    bad = df[df["exact_match"] < 1.0]
    return [
        Check(
            "exact match 1.0",
            "all",
            "all",
            bad.empty,
            f"everywhere ({len(df)} cells)" if bad.empty else ", ".join(sorted(set(bad["strategy"]))),
        )
    ]


def check_all(df: pd.DataFrame, r: Roles, noise: float = NOISE) -> list[Check]:
    """Every target the roles name."""
    out = exact_match(df)
    for distilled, trained in r.distilled:
        out += distilled_acceptance(df, distilled, trained, r.runs_on(distilled))
    for hybrid, parts in r.hybrid:
        out += hybrid_speedup(df, hybrid, parts, noise)
    for adaptive, base in r.adaptive:
        out += adaptive_speedup(df, adaptive, base, noise)
    return out


def check_spec(df: pd.DataFrame, spec_toml: str, noise: float = NOISE) -> list[Check]:
    """Every target of the spec a run stored (its TOML text), over that run's summary."""
    from orchestrator.spec import parse_spec

    return check_all(df, roles(parse_spec(spec_toml)), noise)


def checks_table(checks: list[Check]) -> str:
    """The verdicts as a Markdown table."""
    return pd.DataFrame([c.__dict__ for c in checks]).to_markdown(index=False)
