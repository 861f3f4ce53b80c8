"""One shape for every science check (`Check`), and the comparisons they are read off.

A check is a verdict (`analysis.checks.rules.judge`): *holds* when the figure's 95% interval over prompts lies on
the target's side beyond the practical margin (speed only), *does not hold* when it lies on the other side, a *tie*
when it lies within the margin, *inconclusive* otherwise or under 10 prompts; a family of verdicts is then corrected
for multiplicity (`analysis.checks.families`). A target on one cell ("never
loses to plain": speedup >= 1) reads the cell's interval off `analysis.summary.summary_frame`; a target comparing two
cells ("A beats B") is a paired bootstrap of their difference over the prompts both ran, from
`storage.summary.prompt_frame` (`prompts`). Without `prompts` the difference's interval is bounded by the two cells'
own intervals (lo of A - hi of B to hi of A - lo of B), which holds or fails only where they do not overlap. The
paper's claims (`analysis.checks.claims`), the future-work targets (`analysis.checks.targets`) and the
token-tree targets (`analysis.checks.trees`) all return `Check` rows, so a test, the demo and the README read
the same verdicts, each with the estimate, its interval and the prompts behind it.

Example:
    >>> threshold_check("never loses to plain", "pydoc", "cached", row, "speedup", ">=", 1.0).verdict
    'holds'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

import numpy as np
import pandas as pd

from analysis import stats
from analysis.checks.rules import EXACT, Judgement, all_of, bounds_text, judge, margin_for

UNCACHED = "uncached"  # the regime where the hybrid must match its better part; elsewhere it must not lose to plain


TABLE_FIELDS = ("target", "task", "regime", "k", "verdict", "detail")  # what a table of checks shows


@dataclass(frozen=True)
class Check:
    """One verdict: which target (its name), where, holds / does not hold / inconclusive (`analysis.stats`), the
    numbers behind it or the reason there are none (`detail`), and the figure with its interval where one estimate
    decides it (`figure`: a cell's value, or a paired difference; None for a verdict over several)."""

    target: str
    task: str
    regime: str
    verdict: str
    detail: str
    figure: stats.Estimate | None = field(default=None, compare=False)
    k: int | None = None  # the k a verdict is about, where it is about one
    p: float = field(default=float("nan"), compare=False)  # one-sided p of a decisive verdict (`rules.judge`)
    family: str = ""  # the family it is corrected within (`analysis.checks.families`); "" = its target
    before: str = field(default="", compare=False)  # its verdict at 95% alone, once its family is corrected
    family_size: int = field(default=1, compare=False)

    @property
    def name(self) -> str:
        return self.target

    @property
    def ok(self) -> bool:
        """Whether the target holds (its whole interval on its side)."""
        return self.verdict == stats.HOLDS


def combine(verdicts: list[str]) -> str:
    """All of several distinct claims (never several k of one: those are a family): holds when every one holds, does
    not hold when any does not, a tie when the rest hold and one ties, else inconclusive (`rules.all_of`)."""
    return all_of([Judgement(v, 0.0) for v in verdicts]).verdict


def interval_text(e: stats.Estimate, fmt: str = ".2f", unit: str = "") -> str:
    """ "1.23x [1.05, 1.41], 20 prompts": an estimate, its 95% interval and its prompts."""
    if e.value != e.value:
        return "missing"
    return f"{e.value:{fmt}}{unit} {bounds_text(e, fmt)}, {e.n} prompts"


def cell_estimate(row: pd.Series | None, metric: str) -> stats.Estimate:
    """A summary row's `metric` with its interval (NaN bounds where the frame has none) and prompts."""
    if row is None:
        return stats.NAN
    lo, hi = (float(row.get(f"{metric}_{b}", float("nan"))) for b in ("lo", "hi"))
    n = row.get("n_prompts", row.get("prompts", 0))
    return stats.Estimate(float(row[metric]), lo, hi, int(n) if n == n else 0)


def threshold_check(
    target: str, task: str, regime: str, row: pd.Series | None, metric: str, side: str, at: float, margin: float = 0.0
) -> Check:
    """A target on one cell: its `metric` interval against `at` (e.g. speedup > 1) beyond `margin`."""
    e = cell_estimate(row, metric)
    j = judge(e, at, side, margin)
    k = int(row["k"]) if row is not None and "k" in row else None
    text = interval_text(e, unit=_unit(metric)) + (f" (margin {margin:.2f})" if margin else "")
    return Check(target, task, regime, j.verdict, text, figure=e, k=k, p=j.p)


def _unit(metric: str) -> str:
    return "x" if metric == "speedup" else ""


# per-prompt figure of a generation: numerator, denominator (summed over prompts, as `analysis.stats` takes them)
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


class Judged(NamedTuple):
    """A comparison's verdict, its detail line, the verdict's p and the difference it was read off."""

    verdict: str
    detail: str
    p: float
    figure: stats.Estimate


def compare(
    df: pd.DataFrame,
    prompts: pd.DataFrame | None,
    a: Side,
    b: Side,
    metric: str,
    side: str = ">",
    model_error: Mapping[str, float] | None = None,
    paired: tuple[Side, Side] | None = None,
) -> Judged:
    """ "A's `metric` `side` B's": the difference's interval against 0, beyond the practical margin on speed
    (`rules.margin_for`: 2% of B's figure plus the regime's `model_error`); a tie where two speed cells made the same
    rounds on every prompt. `paired`: the sides the prompts' difference is taken between, where they are not A's and
    B's cells (`cross_fitted`)."""
    pa, pb = paired or (a, b)
    d = difference(df, prompts, pa, pb, metric)
    ea, eb = _summary_side(df, a, metric), _summary_side(df, b, metric)
    margin = margin_for(metric, eb.value, a.regime, model_error)
    j = judge(d, 0.0, side, margin)
    same = _same_rounds(prompts, pa, pb) if metric not in EXACT and prompts is not None else 0
    if same:
        j = Judgement(stats.TIE, 0.0)
    how = "paired" if prompts is not None else "from the cells' intervals"
    how += f"; margin {margin:.2f}" if margin else ""
    how += f"; the same rounds on all {same} prompts" if same else ""
    figures = f"{interval_text(ea, unit=_unit(metric))} vs {interval_text(eb, unit=_unit(metric))}"
    detail = f"{figures}; difference " + (
        f"{d.value:+.2f} {bounds_text(d, signed=True)} ({how}, {d.n} prompts)" if d.value == d.value else "missing"
    )
    return Judged(j.verdict, detail, j.p, d)


def _rounds(prompts: pd.DataFrame, s: Side) -> pd.DataFrame:
    """Per prompt (`pair`) a side's verifier rounds and tokens (their mean over its k)."""
    g = prompts[(prompts["strategy"] == s.strategy) & (prompts["task"] == s.task) & (prompts["regime"] == s.regime)]
    g = one_measure(g[g["k"].isin(list(s.ks))])
    return g.groupby("pair")[["rounds", "n_tokens"]].mean()


def _same_rounds(prompts: pd.DataFrame, a: Side, b: Side) -> int:
    """The prompts two sides share when they made the same rounds and tokens on every one of them, else 0."""
    if not {"rounds", "n_tokens", "pair"} <= set(prompts.columns):
        return 0
    both = _rounds(prompts, a).join(_rounds(prompts, b), how="inner", rsuffix="_b")
    same = (both["rounds"] == both["rounds_b"]) & (both["n_tokens"] == both["n_tokens_b"])
    return len(both) if len(both) and bool(same.all()) else 0


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


SELECT_SEED = 0  # the seeded split of a task's prompts into two halves, each choosing the best k the other is judged at
CHOSEN = -1  # the k label of rows taken at the k the other half chose


def halves(prompts: pd.DataFrame, task: str) -> tuple[set, set]:
    """The task's prompts (`pair`) split in two seeded halves."""
    pairs = sorted(prompts.loc[prompts["task"] == task, "pair"].unique(), key=str)
    order = np.random.default_rng(SELECT_SEED).permutation(len(pairs))
    first = {pairs[i] for i in order[: len(pairs) // 2]}
    return first, set(pairs) - first


def _best_k_on(rows: pd.DataFrame, pairs: set) -> int | None:
    """The k with the highest ratio of summed tokens/s to plain's over these prompts."""
    sums = rows[rows["pair"].isin(pairs)].groupby("k")[["tokens_per_s", "plain_tokens_per_s"]].sum(min_count=1)
    speed = (sums["tokens_per_s"] / sums["plain_tokens_per_s"]).dropna()
    return None if speed.empty else int(speed.idxmax())


def held_out(prompts: pd.DataFrame | None, strategy: str, task: str, regime: str):
    """A strategy's best k chosen out of sample: each half of the task's prompts judged at the k the other half
    chose (so every prompt is judged, none by the k it chose: no winner's curse). (its per-prompt rows so judged,
    relabelled k = CHOSEN; the two k chosen, the first half's first); None without per-prompt figures, with a half
    empty or where a half ran no k."""
    if prompts is None or prompts.empty:
        return None
    one, two = halves(prompts, task)
    if not one or not two:
        return None
    g = prompts[(prompts["strategy"] == strategy) & (prompts["task"] == task) & (prompts["regime"] == regime)]
    g = one_measure(g)
    ks = (_best_k_on(g, two), _best_k_on(g, one))
    if None in ks:
        return None
    rows = pd.concat([g[(g["k"] == k) & g["pair"].isin(judged)] for k, judged in zip(ks, (one, two))])
    return rows.assign(k=CHOSEN), ks


def cross_fitted(prompts: pd.DataFrame | None, a: str, b: str, task: str, regime: str):
    """A's and B's best k chosen out of sample (`held_out`): (their per-prompt rows so judged, relabelled k =
    CHOSEN, A's side, B's side, a note naming the k chosen); None where either has none."""
    chosen = [held_out(prompts, strategy, task, regime) for strategy in (a, b)]
    if None in chosen:
        return None
    notes = [f"{strategy} {ks[0]}, {ks[1]}" for strategy, (_, ks) in zip((a, b), chosen)]
    note = f"; best k chosen on the other half of the prompts ({'; '.join(notes)})"
    sides = [Side(strategy, task, regime, (CHOSEN,)) for strategy in (a, b)]
    return pd.concat([rows for rows, _ in chosen]), *sides, note


def held_out_threshold_check(
    df: pd.DataFrame, prompts: pd.DataFrame | None, target: str, strategy: str, task: str, regime: str, margin: float
) -> Check | None:
    """ "A strategy's speedup at its best k > 1" judged out of sample: each half of the prompts at the k the other
    half chose (`held_out`), the ratio of summed tokens/s to plain's over all prompts so judged, against 1 beyond
    `margin` (the regime's model error included: the per-prompt figures carry none). A k whose replayed cell has no
    validated model error (its summary interval is NaN) makes it inconclusive. None without per-prompt figures."""
    chosen = held_out(prompts, strategy, task, regime)
    if chosen is None:
        return None
    rows, ks = chosen
    e = stats.ratio_of_sums(rows["tokens_per_s"].astype(float), rows["plain_tokens_per_s"].astype(float))
    cells = cell_rows(df, strategy, task, regime)
    unknown = any(cells.loc[cells["k"] == k, "speedup_lo"].isna().any() for k in ks) if "speedup_lo" in cells else False
    j = judge(e, 1.0, ">", float("nan") if unknown else margin)
    text = interval_text(e, unit="x") + (f" (margin {margin:.2f})" if margin else "")
    why = "; a chosen k's replayed speed has no validated model error" if unknown else ""
    detail = f"k={ks[0]}, {ks[1]} (each half of the prompts at the k the other chose): {text}{why}"
    return Check(target, task, regime, j.verdict, detail, figure=e, k=ks[0], p=j.p)


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


# wide: the claim's two strategies, its task and regime, its frames and the model-error seam, each read once
def best_speedup_check(
    df: pd.DataFrame,
    prompts: pd.DataFrame | None,
    target: str,
    a: str,
    b: str,
    task: str,
    regime: str,
    side: str,
    model_error: Mapping[str, float] | None = None,
) -> Check | None:
    """A's best speedup against B's best (each at its own best k), paired over prompts, beyond the speed margin; None
    where either is missing. With per-prompt figures each prompt is judged at the k chosen on the other half of the
    prompts (`cross_fitted`); the figures shown are the cells at the best k over all prompts."""
    sa, sb = best_side(df, a, task, regime), best_side(df, b, task, regime)
    if sa is None or sb is None:
        return None
    fitted = cross_fitted(prompts, a, b, task, regime)
    judged, paired, note = (fitted[0], fitted[1:3], fitted[3]) if fitted else (prompts, None, "")
    j = compare(df, judged, sa, sb, "speedup", side, model_error, paired)
    detail = f"k={sa.ks[0]} vs k={sb.ks[0]}: {j.detail}" + _passes(df, (a, b), task, regime) + note
    return Check(target, task, regime, j.verdict, detail, figure=j.figure, p=j.p)


def checks_table(checks: list[Check]) -> str:
    """The verdicts as a Markdown table (k blank where a verdict is about no single k)."""
    rows = [{f: getattr(c, f) for f in TABLE_FIELDS} | {"k": "" if c.k is None else str(c.k)} for c in checks]
    return pd.DataFrame(rows, columns=list(TABLE_FIELDS)).to_markdown(index=False)
