"""Token-tree and k = "auto" strategies: spec validation (one-line errors), roles read off the spec, targets."""

from __future__ import annotations

import pandas as pd
import pytest

from orchestrator.demo import DEMO_SPEC
from orchestrator.spec import AUTO_MAX_K, load_spec, parse_spec
from orchestrator.tree_targets import auto_vs_fixed, tree_checks, tree_roles, tree_vs_chain
from workers.errors import SpecError

BASE = """
[experiment]
name = "t"
[verifier]
model = "org/model"
[[corpora]]
name = "c"
path = "demo:pydoc-train"
[[tasks]]
name = "t"
path = "demo:pydoc-test"
[[strategies]]
name = "s"
"""


@pytest.mark.parametrize(
    "keys, error",
    [
        (
            'draft = "ngram"\ntree = 4',
            "strategies[0].tree: tree = N needs a draft with an instance base (olifant, hybrid), not 'ngram'",
        ),
        ('draft = "suffix"\nk = "auto"', 'strategies[0].k: k = "auto" needs a draft with an instance base'),
        ('draft = "olifant"\ncorpus = "c"\ntree = 0', "tree: Input should be greater than 0 (got 0)"),
        ('draft = "olifant"\ncorpus = "c"\ntree = -2', "tree: Input should be greater than 0 (got -2)"),
        ('draft = "olifant"\ncorpus = "c"\ntree = 4\nk = [3]', "k = [3]: tree = 4 is the budget of every pass"),
        (
            'draft = "olifant"\ncorpus = "c"\nk = ["auto", 3]',
            'k = "auto" chooses the length itself; give it alone, not in a grid',
        ),
        ('draft = "olifant"\ncorpus = "c"\nk = "fast"', "give a list of integers or \"auto\" (got 'fast')"),
        ('draft = "olifant"\ncorpus = "c"\nauto = true', 'strategies[0].auto: unknown key; write k = "auto"'),
        ('draft = "olifant"\ncorpus = "c"\noptimise = "energy"', 'optimise applies to k = "auto" only'),
        (
            'draft = "olifant"\ncorpus = "c"\nk = "auto"\noptimise = "joules"',
            "optimise: Input should be 'speed' or 'energy'",
        ),
        ('draft = "hybrid"\ncorpus = "c"\ntree = 3\nadaptive = true', "it cannot be combined with adaptive = true"),
        ('draft = "olifant"\ncorpus = "c"\ntree = 3\n[sweep]\ntemperatures = [0.7]', "token trees are greedy only"),
    ],
)
def test_bad_tree_and_auto_keys_are_one_line_errors(keys, error):
    with pytest.raises(SpecError) as info:
        parse_spec(BASE + keys)
    assert error in str(info.value) and "\n" not in str(info.value)


def test_tree_and_auto_cells_carry_budget_and_options():
    spec = parse_spec(
        BASE + 'draft = "hybrid"\ncorpus = "c"\nk = "auto"\ntree = 6\noptimise = "energy"\n'
        '[[strategies]]\nname = "a"\ndraft = "olifant"\ncorpus = "c"\nk = "auto"'
    )
    tree_auto, auto = spec.strategies
    assert tree_auto.ks([3, 5]) == [6] and auto.ks([3, 5]) == [AUTO_MAX_K]
    assert tree_auto.options.identity()["optimise"] == "energy" and auto.options.identity()["optimise"] == "speed"
    assert "tree" not in parse_spec(BASE + 'draft = "olifant"\ncorpus = "c"').strategies[0].options.identity()


def test_roles_of_the_demo_spec():
    trees, auto = tree_roles(load_spec(DEMO_SPEC))
    for d in ("shakespeare", "pydoc", "legal"):
        assert (f"distilled-{d}-tree", f"distilled-{d}") in trees
        assert (f"hybrid-{d}-auto", f"hybrid-{d}") in auto


def frame(rows):
    return pd.DataFrame(rows, columns=["strategy", "task", "k", "regime", "speedup", "mean_accepted_tokens", "mal"])


def test_tree_targets_compare_at_the_same_budget():
    df = frame(
        [
            ("tree", "t", 5, "uncached", 1.6, 2.5, 1.5),
            ("chain", "t", 5, "uncached", 1.5, 2.2, 1.2),
            ("chain", "t", 3, "uncached", 1.7, 2.0, 1.0),
            ("tree", "t", 5, "cached", 0.9, 1.9, 0.9),
            ("chain", "t", 5, "cached", 1.0, 2.0, 1.0),
        ]
    )
    checks = {(c.target.split(" ")[1], c.regime): c for c in tree_vs_chain(df, "tree", "chain")}
    assert checks[("more", "uncached")].ok and checks[("more", "uncached")].detail.startswith("2.50 vs 2.20")
    assert not checks[("best", "uncached")].ok  # 1.6 against the chain's best, 1.7 at k = 3
    assert not checks[("more", "cached")].ok and "(reported)" in checks[("best", "cached")].target


def test_auto_target_within_noise_of_the_best_fixed_k():
    df = frame(
        [
            ("auto", "t", 8, "uncached", 1.48, 2.0, 1.0),
            ("fixed", "t", 3, "uncached", 1.5, 2.0, 1.0),
            ("fixed", "t", 5, "uncached", 1.4, 2.0, 1.0),
            ("auto", "t", 8, "cached", 1.0, 2.0, 1.0),
            ("fixed", "t", 5, "cached", 1.2, 2.0, 1.0),
        ]
    )
    by_regime = {c.regime: c for c in auto_vs_fixed(df, "auto", "fixed", noise=0.05)}
    assert by_regime["uncached"].ok and "(k=3)" in by_regime["uncached"].detail
    assert not by_regime["cached"].ok
    assert len(tree_checks(df, ((), (("auto", "fixed"),)))) == 2
