"""The targets of token trees (`tree = N`) and cost-model k (`k = "auto"`), checked on a results summary.

A tree strategy is compared with the chain strategy of the same draft, artifacts and options (`tree` left out)
at the same budget (the chain's k equal to the tree's budget), and an auto strategy with the same draft's
strategy at fixed k (`auto` and `optimise` left out), both read off the spec, never off names. Targets:
- trees: more tokens per pass than the chain at the same budget, in every task and regime;
- trees: a higher best speedup than the chain's best, at least uncached (the other regimes are reported too);
- auto: at least the best fixed k's speedup, in every task and regime.
Each is a paired difference over prompts with its 95% interval, holds / does not hold / tie / inconclusive as
`analysis.checks.check` reads them (speed beyond the practical margin, tokens per pass exact), each target's
verdicts over tasks x regimes one family, Holm-corrected (`analysis.checks.families`).

Example:
    >>> [c for c in tree_checks(df, tree_roles(spec), prompts) if c.verdict != "holds"]
    []
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import pandas as pd

from analysis.checks.check import UNCACHED, Check, Side, best_speedup_check, cell_rows, compare
from analysis.checks.families import holm
from analysis.checks.targets import requirements

TREE_KEYS = ("tree",)
AUTO_KEYS = ("auto", "optimise")


def _identity_without(strategy, keys: tuple[str, ...]) -> dict:
    return {k: v for k, v in strategy.options.identity().items() if k not in keys}


def _twin(spec, s, keys: tuple[str, ...]) -> str | None:
    """The first chain, fixed-k strategy of s's draft and artifacts whose options equal s's without `keys`."""
    for t in spec.strategies:
        opts = t.options
        plain = getattr(opts, "tree", None) is None and not getattr(opts, "auto", False)
        if (
            t is not s
            and plain
            and t.draft == s.draft
            and not getattr(opts, "adaptive", False)
            and requirements(t) == requirements(s)
            and _identity_without(t, keys) == _identity_without(s, keys)
        ):
            return t.name
    return None


def tree_roles(spec) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """((tree strategy, its chain twin), ...), ((auto strategy, its fixed-k twin), ...) in a validated spec."""
    trees, auto = [], []
    for s in spec.strategies:
        if getattr(s.options, "auto", False):
            keys = AUTO_KEYS + (TREE_KEYS if getattr(s.options, "tree", None) else ())
            if (twin := _twin(spec, s, keys)) is not None:
                auto.append((s.name, twin))
        elif getattr(s.options, "tree", None) is not None and (twin := _twin(spec, s, TREE_KEYS)) is not None:
            trees.append((s.name, twin))
    return tuple(trees), tuple(auto)


def _coordinates(df: pd.DataFrame, strategy: str) -> list[tuple[str, str]]:
    """The (task, regime) pairs a strategy ran, sorted."""
    rows = df[df["strategy"] == strategy]
    return sorted(set(zip(rows["task"], rows["regime"])))


def tree_vs_chain(
    df: pd.DataFrame,
    tree: str,
    chain: str,
    prompts: pd.DataFrame | None = None,
    model_error: Mapping[str, float] | None = None,
) -> list[Check]:
    """Tokens per pass against the chain at the same budget (everywhere); best speedup against the chain's best
    (beyond the speed margin, the "(reported)" regimes in the uncached one's family)."""
    out = []
    for task, regime in _coordinates(df, tree):
        part = cell_rows(df, tree, task, regime)
        if not len(part):
            continue
        budget = int(part["k"].iloc[0])
        if budget in set(cell_rows(df, chain, task, regime)["k"]):
            j = compare(
                df,
                prompts,
                Side(tree, task, regime, (budget,)),
                Side(chain, task, regime, (budget,)),
                "mean_accepted_tokens",
            )
            mal = float(part["mal"].iloc[0])
            target = f"{tree} more tokens/pass than {chain} at k={budget}"
            detail = f"{j.detail} (path acceptance: accepted/pass {mal:.2f})"
            out.append(Check(target, task, regime, j.verdict, detail, j.figure, k=budget, p=j.p))
        family = f"{tree} best speedup > {chain}'s best"
        target = family + ("" if regime == UNCACHED else " (reported)")
        check = best_speedup_check(df, prompts, target, tree, chain, task, regime, ">", model_error)
        if check is not None:
            out.append(replace(check, family=family))
    return out


def auto_vs_fixed(
    df: pd.DataFrame,
    auto: str,
    base: str,
    prompts: pd.DataFrame | None = None,
    model_error: Mapping[str, float] | None = None,
) -> list[Check]:
    """The auto strategy's best speedup >= its fixed-k twin's at its best k, per task and regime (paired difference
    >= 0 beyond the speed margin; equal rounds are a tie)."""
    out = []
    for task, regime in _coordinates(df, auto):
        target = f"{auto} >= {base} at its best fixed k"
        check = best_speedup_check(df, prompts, target, auto, base, task, regime, ">=", model_error)
        if check is not None:
            out.append(check)
    return out


def tree_checks(
    df: pd.DataFrame, roles: tuple, prompts: pd.DataFrame | None = None, model_error: Mapping[str, float] | None = None
) -> list[Check]:
    """Every tree and auto target of `tree_roles`, each family Holm-corrected; `prompts`
    (`storage.summary.prompt_frame`) pairs them, `model_error` widens the speed margins."""
    trees, auto = roles
    out = [c for tree, chain in trees for c in tree_vs_chain(df, tree, chain, prompts, model_error)]
    return holm(out + [c for a, base in auto for c in auto_vs_fixed(df, a, base, prompts, model_error)])
