"""One shape for every science check (`Check`), and the comparisons they are read off.

A check is a verdict (`storage.stats.verdict`): *holds* when the figure's 95% interval over prompts lies on the
target's side, *does not hold* when it lies on the other side, *inconclusive* otherwise. A target on one cell ("never
loses to plain": speedup >= 1) reads the cell's interval off `storage.queries.summary_frame`; a target comparing two
cells ("A beats B") is a paired bootstrap of their difference over the prompts both ran, from
`storage.summary.prompt_frame` (`prompts`). Without `prompts` the difference's interval is bounded by the two cells'
own intervals (lo of A - hi of B to hi of A - lo of B), which holds or fails only where they do not overlap. The
paper's claims (`orchestrator.checks.claims`), the future-work targets (`orchestrator.checks.targets`) and the
token-tree targets (`orchestrator.checks.trees`) all return `Check` rows, so a test, the demo and the README read
the same verdicts, each with the estimate, its interval and the prompts behind it.

Example:
    >>> threshold_check("never loses to plain", "pydoc", "cached", row, "speedup", ">=", 1.0).verdict
    'holds'
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from storage import stats

UNCACHED = "uncached"  # the regime where the hybrid must match its better part; elsewhere it must not lose to plain


TABLE_FIELDS = ("target", "task", "regime", "verdict", "detail")  # what a table of checks shows


@dataclass(frozen=True)
class Check:
    """One verdict: which target (its name), where, holds / does not hold / inconclusive (`storage.stats`), the
    numbers behind it or the reason there are none (`detail`), and the figure with its interval where one estimate
    decides it (`figure`: a cell's value, or a paired difference; None for a verdict over several)."""

    target: str
    task: str
    regime: str
    verdict: str
    detail: str
    figure: stats.Estimate | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.target

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


def threshold_check(
    target: str, task: str, regime: str, row: pd.Series | None, metric: str, side: str, at: float
) -> Check:
    """A target on one cell: its `metric` interval against `at` (e.g. speedup > 1)."""
    e = cell_estimate(row, metric)
    verdict = stats.verdict(e.lo, e.hi, at, side)
    return Check(target, task, regime, verdict, interval_text(e, unit=_unit(metric)), figure=e)


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
    g = one_measure(g[g["k"].isin(list(ks))])
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
    rows = cell_rows(df, side.strategy, side.task, side.regime)
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
    verdict, detail, _ = _compared(df, prompts, a, b, metric, side)
    return verdict, detail


def _compared(
    df: pd.DataFrame, prompts: pd.DataFrame | None, a: Side, b: Side, metric: str, side: str
) -> tuple[str, str, stats.Estimate]:
    """`compare` with the difference it read the verdict off."""
    d = difference(df, prompts, a, b, metric)
    ea, eb = _summary_side(df, a, metric), _summary_side(df, b, metric)
    how = "paired" if prompts is not None else "from the cells' intervals"
    bounds = f"[{d.lo:+.2f}, {d.hi:+.2f}]" if d.lo == d.lo else "[no interval]"
    figures = f"{interval_text(ea, unit=_unit(metric))} vs {interval_text(eb, unit=_unit(metric))}"
    detail = f"{figures}; difference " + (
        f"{d.value:+.2f} {bounds} ({how}, {d.n} prompts)" if d.value == d.value else "missing"
    )
    return stats.verdict(d.lo, d.hi, 0.0, side), detail, d


def one_measure(rows: pd.DataFrame) -> pd.DataFrame:
    """The current version's rows of one measure: the replayed ones where a coordinate has them (they cover every
    prompt; timed cells validate their predictions), else the timed ones."""
    if "version" in rows:
        rows = rows[rows["version"] == "current"]
    if "measure" in rows and (rows["measure"] == "replay").any():
        rows = rows[rows["measure"] == "replay"]
    return rows


def cell_rows(df: pd.DataFrame, strategy: str, task: str, regime: str) -> pd.DataFrame:
    return one_measure(df[(df["strategy"] == strategy) & (df["task"] == task) & (df["regime"] == regime)])


def ks_of(df: pd.DataFrame, strategy: str, task: str, regime: str) -> tuple[int, ...]:
    return tuple(sorted(int(k) for k in cell_rows(df, strategy, task, regime)["k"]))


def best_speedup(df: pd.DataFrame, strategy: str, task: str, regime: str) -> float:
    s = cell_rows(df, strategy, task, regime)["speedup"]
    return float(s.max()) if len(s) else float("nan")


def best_k(df: pd.DataFrame, strategy: str, task: str, regime: str) -> int | None:
    """The k of a strategy's best speedup on a task and regime (None where it did not run there)."""
    rows = cell_rows(df, strategy, task, regime).dropna(subset=["speedup"])
    return int(rows.loc[rows["speedup"].idxmax(), "k"]) if len(rows) else None


def best_side(df: pd.DataFrame, strategy: str, task: str, regime: str) -> Side | None:
    k = best_k(df, strategy, task, regime)
    return None if k is None else Side(strategy, task, regime, (k,))


def _passes(df: pd.DataFrame, strategies: tuple[str, str], task: str, regime: str) -> str:
    """ "; tokens/pass a vs b" at each one's best speedup: timing-free, so a speedup gap between equal figures
    is the machine's noise ("" without the column)."""
    if "mean_accepted_tokens" not in df:
        return ""
    vals = []
    for s in strategies:
        rows = cell_rows(df, s, task, regime).dropna(subset=["speedup"])
        if not len(rows):
            return ""
        vals.append(float(rows.loc[rows["speedup"].idxmax(), "mean_accepted_tokens"]))
    return f"; tokens/pass {vals[0]:.2f} vs {vals[1]:.2f}"


def best_speedup_check(
    df: pd.DataFrame, prompts: pd.DataFrame | None, target: str, a: str, b: str, task: str, regime: str, side: str
) -> Check | None:
    """A's best speedup against B's best (each at its own best k), paired over prompts; None where either is missing."""
    sa, sb = best_side(df, a, task, regime), best_side(df, b, task, regime)
    if sa is None or sb is None:
        return None
    verdict, detail, d = _compared(df, prompts, sa, sb, "speedup", side)
    detail = f"k={sa.ks[0]} vs k={sb.ks[0]}: {detail}" + _passes(df, (a, b), task, regime)
    return Check(target, task, regime, verdict, detail, figure=d)


def checks_table(checks: list[Check]) -> str:
    """The verdicts as a Markdown table."""
    return pd.DataFrame([{f: getattr(c, f) for f in TABLE_FIELDS} for c in checks]).to_markdown(index=False)
