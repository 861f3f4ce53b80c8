"""The targets of the future-work strategies (distilled, hybrid, adaptive), checked on a results summary.

Which strategies a target compares is read off the spec, never off their names: a *distilled* strategy drafts
from a `labels = "verifier"` corpus and is compared with the strategy of the same draft and options on the
corpus-trained instance base of the same text; a *hybrid* is a strategy whose draft declares `parts` in the
draft registry, compared with the fixed-length strategies of those drafts that need no artifact it lacks (its
own instance base, the session draft); an *adaptive* strategy (`adaptive = true`) is compared with the
fixed-length strategy of the same draft, artifacts and options.

Every verdict has three values (`storage.stats.verdict`): *holds* when the figure's 95% interval over prompts lies
on the target's side, *does not hold* when it lies on the other side, *inconclusive* otherwise. A target on one
cell ("never loses to plain": speedup >= 1) reads the cell's interval off `storage.queries.summary_frame`; a target
comparing two cells ("A beats B") is a paired bootstrap of their difference over the prompts both ran, from
`storage.summary.prompt_frame` (`prompts`). Without `prompts` the difference's interval is bounded by the two cells'
own intervals (lo of A - hi of B to hi of A - lo of B), which holds or fails only where they do not overlap. Each
check returns `Check` rows, so a test, the demo and the README read the same verdicts, each line with the estimate,
its interval and the prompts behind it.

Example:
    >>> [c for c in check_all(df, roles(spec), prompts) if c.verdict != "holds"]
    []
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from storage import stats

UNCACHED = "uncached"  # the regime where the hybrid must match its better part; elsewhere it must not lose to plain


@dataclass(frozen=True)
class Check:
    """One verdict: which target, where, holds / does not hold / inconclusive, and the numbers behind it."""

    target: str
    task: str
    regime: str
    verdict: str
    detail: str

    @property
    def ok(self) -> bool:
        """Whether the target holds (its whole interval on its side)."""
        return self.verdict == stats.HOLDS


def combine(verdicts: list[str]) -> str:
    """All of several targets: holds when every one holds, does not hold when any does not, else inconclusive (and
    inconclusive for none)."""
    if verdicts and all(v == stats.HOLDS for v in verdicts):
        return stats.HOLDS
    return stats.FAILS if stats.FAILS in verdicts else stats.INCONCLUSIVE


def interval_text(e: stats.Estimate, fmt: str = ".2f", unit: str = "") -> str:
    """ "1.23x [1.05, 1.41], 20 prompts": an estimate, its 95% interval and its prompts."""
    if e.value != e.value:
        return "missing"
    bounds = f"[{e.lo:{fmt}}, {e.hi:{fmt}}]" if e.lo == e.lo else "[no interval]"
    return f"{e.value:{fmt}}{unit} {bounds}, {e.n} prompts"


def cell_estimate(row: pd.Series | None, metric: str) -> stats.Estimate:
    """A summary row's `metric` with its interval (NaN bounds where the frame has none) and prompts."""
    if row is None:
        return stats.NAN
    lo, hi = (float(row.get(f"{metric}_{b}", float("nan"))) for b in ("lo", "hi"))
    n = row.get("n_prompts", row.get("prompts", 0))
    return stats.Estimate(float(row[metric]), lo, hi, int(n) if n == n else 0)


def threshold_check(target: str, task: str, regime: str, row: pd.Series | None, metric: str, side: str, at: float):
    """A target on one cell: its `metric` interval against `at` (e.g. speedup > 1)."""
    e = cell_estimate(row, metric)
    return Check(target, task, regime, stats.verdict(e.lo, e.hi, at, side), interval_text(e, unit=_unit(metric)))


def _unit(metric: str) -> str:
    return "x" if metric == "speedup" else ""


# per-prompt figure of a generation: numerator, denominator (summed over prompts, as `storage.stats` takes them)
def _per_prompt(g: pd.DataFrame, metric: str) -> tuple[pd.Series, pd.Series]:
    f = lambda c: g[c].astype(float)  # noqa: E731
    if metric == "speedup":
        return f("tokens_per_s"), f("plain_tokens_per_s")
    if metric == "acceptance":
        rate = f("accepted") / f("drafted").where(f("drafted") > 0)
    elif metric == "mean_accepted_tokens":
        rate = f("n_tokens") / f("rounds").where(f("rounds") > 0)
    else:
        rate = f(metric)
    return rate, pd.Series(1.0, index=g.index).where(rate.notna())


def _prompt_figures(prompts: pd.DataFrame, strategy: str, task: str, regime: str, ks, metric: str) -> pd.DataFrame:
    """Per prompt (its data version, `pair`) a cell's `metric` as (num, den); over several k, their mean per prompt."""
    g = prompts[(prompts["strategy"] == strategy) & (prompts["task"] == task) & (prompts["regime"] == regime)]
    g = _one_measure(g[g["k"].isin(list(ks))])
    num, den = _per_prompt(g, metric)
    return pd.DataFrame({"pair": g["pair"], "num": num, "den": den}).groupby("pair").mean()


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a strategy's cell(s) on a task and regime, at k in `ks` (their mean per prompt when
    several; acceptance "over k")."""

    strategy: str
    task: str
    regime: str
    ks: tuple[int, ...]


def _summary_side(df: pd.DataFrame, side: Side, metric: str) -> stats.Estimate:
    rows = _rows(df, side.strategy, side.task, side.regime)
    rows = rows[rows["k"].isin(list(side.ks))]
    if not len(rows):
        return stats.NAN
    es = [cell_estimate(r, metric) for _, r in rows.iterrows()]
    return stats.Estimate(
        *(float(np.mean([getattr(e, f) for e in es])) for f in ("value", "lo", "hi")), min(e.n for e in es)
    )


def difference(df: pd.DataFrame, prompts: pd.DataFrame | None, a: Side, b: Side, metric: str) -> stats.Estimate:
    """A's `metric` minus B's: a paired bootstrap over the prompts both ran (`prompts`), or bounded by the two cells'
    own intervals without it (module doc)."""
    if prompts is not None:
        fa = _prompt_figures(prompts, a.strategy, a.task, a.regime, a.ks, metric)
        fb = _prompt_figures(prompts, b.strategy, b.task, b.regime, b.ks, metric)
        both = fa.join(fb, how="inner", lsuffix="_a", rsuffix="_b")
        return stats.paired_difference(both["num_a"], both["den_a"], both["num_b"], both["den_b"])
    ea, eb = _summary_side(df, a, metric), _summary_side(df, b, metric)
    return stats.Estimate(ea.value - eb.value, ea.lo - eb.hi, ea.hi - eb.lo, min(ea.n, eb.n))


def compare(
    df: pd.DataFrame, prompts: pd.DataFrame | None, a: Side, b: Side, metric: str, side: str = ">"
) -> tuple[str, str]:
    """(verdict, detail) of "A's `metric` `side` B's": the difference's interval against 0."""
    d = difference(df, prompts, a, b, metric)
    ea, eb = _summary_side(df, a, metric), _summary_side(df, b, metric)
    how = "paired" if prompts is not None else "from the cells' intervals"
    bounds = f"[{d.lo:+.2f}, {d.hi:+.2f}]" if d.lo == d.lo else "[no interval]"
    figures = f"{interval_text(ea, unit=_unit(metric))} vs {interval_text(eb, unit=_unit(metric))}"
    detail = f"{figures}; difference " + (
        f"{d.value:+.2f} {bounds} ({how}, {d.n} prompts)" if d.value == d.value else "missing"
    )
    return stats.verdict(d.lo, d.hi, 0.0, side), detail


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
    """Which strategies each target compares in a validated spec (`orchestrator.run.spec.Spec`)."""
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


def _one_measure(rows: pd.DataFrame) -> pd.DataFrame:
    """The current version's rows of one measure: the replayed ones where a coordinate has them (they cover every
    prompt; timed cells validate their predictions), else the timed ones."""
    if "version" in rows:
        rows = rows[rows["version"] == "current"]
    if "measure" in rows and (rows["measure"] == "replay").any():
        rows = rows[rows["measure"] == "replay"]
    return rows


def _rows(df: pd.DataFrame, strategy: str, task: str, regime: str) -> pd.DataFrame:
    return _one_measure(df[(df["strategy"] == strategy) & (df["task"] == task) & (df["regime"] == regime)])


def _ks(df: pd.DataFrame, strategy: str, task: str, regime: str) -> tuple[int, ...]:
    return tuple(sorted(int(k) for k in _rows(df, strategy, task, regime)["k"]))


def distilled_acceptance(
    df: pd.DataFrame, distilled: str, trained: str, tasks: tuple[str, ...], prompts: pd.DataFrame | None = None
) -> list[Check]:
    """`distilled` has a higher acceptance than `trained` on each task it runs on, at every k and regime (the regimes
    both run in: a spec may run a strategy in some regimes only): a paired difference > 0 at each k."""
    out = []
    both = set(df.loc[df["strategy"] == distilled, "regime"]) & set(df.loc[df["strategy"] == trained, "regime"])
    for task in tasks:
        for regime in sorted(both):
            ks = sorted(set(_ks(df, distilled, task, regime)) & set(_ks(df, trained, task, regime)))
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


def _best(df: pd.DataFrame, strategy: str, task: str, regime: str) -> float:
    s = _rows(df, strategy, task, regime)["speedup"]
    return float(s.max()) if len(s) else float("nan")


def _best_k(df: pd.DataFrame, strategy: str, task: str, regime: str) -> int | None:
    """The k of a strategy's best speedup on a task and regime (None where it did not run there)."""
    rows = _rows(df, strategy, task, regime).dropna(subset=["speedup"])
    return int(rows.loc[rows["speedup"].idxmax(), "k"]) if len(rows) else None


def _best_side(df: pd.DataFrame, strategy: str, task: str, regime: str) -> Side | None:
    k = _best_k(df, strategy, task, regime)
    return None if k is None else Side(strategy, task, regime, (k,))


def _passes(df: pd.DataFrame, strategies: tuple[str, str], task: str, regime: str) -> str:
    """ "; tokens/pass a vs b" at each one's best speedup: timing-free, so a speedup gap between equal figures
    is the machine's noise ("" without the column)."""
    if "mean_accepted_tokens" not in df:
        return ""
    vals = []
    for s in strategies:
        rows = _rows(df, s, task, regime).dropna(subset=["speedup"])
        if not len(rows):
            return ""
        vals.append(float(rows.loc[rows["speedup"].idxmax(), "mean_accepted_tokens"]))
    return f"; tokens/pass {vals[0]:.2f} vs {vals[1]:.2f}"


def best_speedup_check(
    df: pd.DataFrame, prompts: pd.DataFrame | None, target: str, a: str, b: str, task: str, regime: str, side: str
) -> Check | None:
    """A's best speedup against B's best (each at its own best k), paired over prompts; None where either is missing."""
    sa, sb = _best_side(df, a, task, regime), _best_side(df, b, task, regime)
    if sa is None or sb is None:
        return None
    verdict, detail = compare(df, prompts, sa, sb, "speedup", side)
    return Check(
        target, task, regime, verdict, f"k={sa.ks[0]} vs k={sb.ks[0]}: {detail}" + _passes(df, (a, b), task, regime)
    )


def hybrid_speedup(
    df: pd.DataFrame, hybrid: str, parts: tuple[str, ...], prompts: pd.DataFrame | None = None
) -> list[Check]:
    """Uncached: hybrid's best speedup >= its better part's best (paired difference >= 0); other regimes: never
    below plain (speedup >= 1 at every k)."""
    out = []
    for task in sorted(df.loc[df["strategy"] == hybrid, "task"].unique()):
        if len(_rows(df, hybrid, task, UNCACHED)):
            best = {p: _best(df, p, task, UNCACHED) for p in parts}
            best = {p: v for p, v in best.items() if v == v}  # a part not run on this task is left out
            top = max(best, key=best.get) if best else None
            check = best_speedup_check(df, prompts, "", hybrid, top, task, UNCACHED, ">=") if top else None
            out.append(
                Check(f"{hybrid} >= better part", task, UNCACHED, check.verdict, f"{top}: {check.detail}")
                if check
                else Check(f"{hybrid} >= better part", task, UNCACHED, stats.INCONCLUSIVE, "no part ran here")
            )
        for regime in sorted(set(df["regime"]) - {UNCACHED}):
            s = _rows(df, hybrid, task, regime).sort_values("k")
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
    for task, regime in sorted(
        set(map(tuple, _one_measure(df[df["strategy"] == adaptive])[["task", "regime"]].values))
    ):
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
    from orchestrator.run.spec import parse_spec

    return check_all(df, roles(parse_spec(spec_toml)), prompts)


def checks_table(checks: list[Check]) -> str:
    """The verdicts as a Markdown table."""
    return pd.DataFrame([c.__dict__ for c in checks]).to_markdown(index=False)
