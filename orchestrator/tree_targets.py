"""The targets of token trees (`tree = N`) and cost-model k (`k = "auto"`), checked on a results summary.

A tree strategy is compared with the chain strategy of the same draft, artifacts and options (`tree` left out)
at the same budget (the chain's k equal to the tree's budget), and an auto strategy with the same draft's
strategy at fixed k (`auto` and `optimise` left out), both read off the spec, never off names. Targets:
- trees: more tokens per pass than the chain at the same budget, in every task and regime;
- trees: a higher best speedup than the chain's best, at least uncached (the other regimes are reported too);
- auto: at least the best fixed k's speedup within `noise`, in every task and regime.

Example:
    >>> [c for c in tree_checks(df, tree_roles(spec)) if not c.ok]
    []
"""

from __future__ import annotations

import pandas as pd

from orchestrator.targets import NOISE, UNCACHED, Check, _best, _passes, _requirements, _rows

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
            and _requirements(t) == _requirements(s)
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


def _tokens_per_pass(df: pd.DataFrame, strategy: str, task: str, regime: str, k: int) -> float:
    rows = _rows(df, strategy, task, regime)
    rows = rows[rows["k"] == k]
    return float(rows["mean_accepted_tokens"].iloc[0]) if len(rows) else float("nan")


def tree_vs_chain(df: pd.DataFrame, tree: str, chain: str) -> list[Check]:
    """Tokens per pass against the chain at the same budget (everywhere); best speedup against the chain's best."""
    out = []
    for (task, regime), part in df[df["strategy"] == tree].groupby(["task", "regime"]):
        budget = int(part["k"].iloc[0])
        a, b = float(part["mean_accepted_tokens"].iloc[0]), _tokens_per_pass(df, chain, task, regime, budget)
        if b == b:
            out.append(
                Check(
                    f"{tree} more tokens/pass than {chain} at k={budget}",
                    task,
                    regime,
                    a > b,
                    f"{a:.2f} vs {b:.2f} (path acceptance: accepted/pass {float(part['mal'].iloc[0]):.2f})",
                )
            )
        ta, tb = _best(df, tree, task, regime), _best(df, chain, task, regime)
        if tb == tb:
            target = f"{tree} best speedup > {chain}'s best" + ("" if regime == UNCACHED else " (reported)")
            out.append(
                Check(target, task, regime, ta > tb, f"{ta:.2f} vs {tb:.2f}" + _passes(df, (tree, chain), task, regime))
            )
    return out


def auto_vs_fixed(df: pd.DataFrame, auto: str, base: str, noise: float = NOISE) -> list[Check]:
    """The auto strategy's speedup >= its fixed-k twin's at its best k, per task and regime (within noise)."""
    out = []
    for (task, regime), part in df[df["strategy"] == auto].groupby(["task", "regime"]):
        fixed = _rows(df, base, task, regime)
        if not len(fixed):
            continue
        a, b = float(part["speedup"].max()), _best(df, base, task, regime)
        k = int(fixed.loc[fixed["speedup"].idxmax(), "k"])
        out.append(
            Check(
                f"{auto} >= {base} at its best fixed k",
                task,
                regime,
                bool(a >= b * (1 - noise)),
                f"{a:.2f} vs {b:.2f} (k={k})" + _passes(df, (auto, base), task, regime),
            )
        )
    return out


def tree_checks(df: pd.DataFrame, roles: tuple, noise: float = NOISE) -> list[Check]:
    """Every tree and auto target of `tree_roles`."""
    trees, auto = roles
    out = [c for tree, chain in trees for c in tree_vs_chain(df, tree, chain)]
    return out + [c for a, base in auto for c in auto_vs_fixed(df, a, base, noise)]
