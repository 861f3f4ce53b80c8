"""Grid expansion and content keys: stable, sensitive to what determines a result, blind to the rest."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.run.cells import TaskPrompts, expand
from orchestrator.run.spec import parse_spec
from workers.errors import SpecError

SPEC = """
[experiment]
name = "{name}"
[verifier]
model = "org/model"
[[corpora]]
name = "c"
path = "/data/c.txt"
[[tasks]]
name = "t"
path = "/data/t.txt"
prompts = 2
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "oli"
draft = "olifant"
corpus = "c"
[[strategies]]
name = "ng"
draft = "ngram"
n = {n}
[sweep]
k = {k}
"""
PROMPTS = [TaskPrompts("t", ("first prompt text", "second prompt text"))]


def cells(name="a", n=4, k=(3, 5), prompts=PROMPTS, **sub):
    text = SPEC.format(name=name, n=n, k=list(k))
    for old, new in sub.items():
        text = text.replace(old, new)
    return expand(parse_spec(text), prompts)


def keys(cs):
    return {c.key for c in cs}


def test_grid_shape():
    cs = cells()
    kinds = Counter(c.kind for c in cs)
    assert kinds == {"train": 1, "reference": 2, "sweep": 2 * 2 * (1 + 2 * 2)}
    plain = [c for c in cs if c.draft == "plain"]
    assert {c.k for c in plain} == {0} and len(plain) == 4
    assert len(keys(cs)) == len(cs)  # every cell distinct


def test_keys_are_stable_and_ignore_the_experiment_name():
    assert keys(cells()) == keys(cells()) == keys(cells(name="other"))


def test_adding_k_adds_only_new_cells():
    old, new = keys(cells(k=(3, 5))), keys(cells(k=(3, 5, 12)))
    assert old < new
    added = [c for c in cells(k=(3, 5, 12)) if c.key in new - old]
    assert {c.k for c in added} == {12} and len(added) == 2 * 2 * 2


def test_option_changes_touch_only_their_cells():
    a, b = cells(n=4), cells(n=3)
    changed = {c.strategy for c in a if c.key not in keys(b)}
    assert changed == {"ng"}


def test_corpus_change_rekeys_train_and_its_olifant_cells():
    a, b = cells(), cells(**{'"/data/c.txt"': '"/data/c2.txt"'})
    changed = Counter((c.kind, c.strategy) for c in a if c.key not in keys(b))
    assert changed == {("train", None): 1, ("sweep", "oli"): 8}


def test_verifier_and_prompt_changes_rekey_generations():
    other_model = cells(**{'"org/model"': '"org/bigger"'})
    assert not (keys(cells()) - {c.key for c in cells() if c.kind == "train"}) & keys(other_model)
    other_prompt = [TaskPrompts("t", ("first prompt text", "a different second prompt"))]
    moved = [c for c in cells(prompts=other_prompt) if c.key not in keys(cells())]
    assert {c.prompt_index for c in moved} == {1}


def test_sharding_a_corpus_does_not_rekey_anything():
    # sharded counting builds the identical instance base, so nothing needs to run again
    sharded = cells(**{'path = "/data/c.txt"': 'path = "/data/c.txt"\nshards = 4'})
    assert keys(sharded) == keys(cells())


def test_per_strategy_k_and_tasks_limit_the_grid(tmp_path):
    """A strategy's own `k` and `tasks` replace the sweep's for it alone; cell_counts agrees with expand."""
    from orchestrator.run.cells import expand
    from orchestrator.run.spec import parse_spec

    spec = parse_spec("""
[experiment]
name = "x"
[verifier]
model = "m"
[[tasks]]
name = "a"
path = "/a.txt"
prompts = 2
[[tasks]]
name = "b"
path = "/b.txt"
prompts = 3
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "ng"
draft = "ngram"
k = [12, 16]
tasks = ["b"]
[sweep]
k = [3]
regimes = ["uncached"]
""")
    prompts = [TaskPrompts("a", ("p a0", "p a1")), TaskPrompts("b", ("p b0", "p b1", "p b2"))]
    sweeps = [c for c in expand(spec, prompts) if c.kind == "sweep"]
    ng = [(c.task, c.k) for c in sweeps if c.strategy == "ng"]
    assert sorted(set(ng)) == [("b", 12), ("b", 16)] and len(ng) == 6  # 3 prompts x 2 k, task b only
    assert len([c for c in sweeps if c.strategy == "plain"]) == 5  # 5 prompts x k 0
    assert spec.cell_counts()["sweep"] == len(sweeps) == 11


def test_a_strategy_runs_only_in_its_regimes_with_unchanged_keys():
    from orchestrator.run.cells import expand
    from orchestrator.run.spec import parse_spec

    base = """
[experiment]
name = "x"
[verifier]
model = "m"
[[tasks]]
name = "a"
path = "/a.txt"
prompts = 2
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "ng"
draft = "ngram"
{regimes}
[sweep]
k = [3]
regimes = ["uncached", "cached", "cached-standard"]
"""
    prompts = [TaskPrompts("a", ("p0", "p1"))]
    every = [c for c in expand(parse_spec(base.format(regimes="")), prompts) if c.kind == "sweep"]
    spec = parse_spec(base.format(regimes='regimes = ["cached-standard", "uncached"]'))
    some = [c for c in expand(spec, prompts) if c.kind == "sweep"]
    assert {c.regime for c in some if c.strategy == "ng"} == {"uncached", "cached-standard"}
    assert {c.regime for c in some if c.strategy == "plain"} == {"uncached", "cached", "cached-standard"}
    assert spec.cell_counts()["sweep"] == len(some) == 2 * 3 + 2 * 2
    assert {c.key for c in some} < {c.key for c in every}  # the same cells, fewer of them
    with pytest.raises(SpecError, match=r"strategies\[1\] \(ng\): regime 'cached' is not in \[sweep\] regimes"):
        parse_spec(base.format(regimes='regimes = ["cached"]').replace('"uncached", "cached", ', '"uncached", '))
    with pytest.raises(SpecError, match="regimes"):
        parse_spec(base.format(regimes='regimes = ["paged"]'))


def test_temperatures_multiply_the_grid_and_leave_greedy_keys_unchanged():
    from orchestrator.run.cells import expand
    from orchestrator.run.spec import parse_spec

    base = """
[experiment]
name = "x"
seed = 7
[verifier]
model = "m"
[[tasks]]
name = "a"
path = "/a.txt"
prompts = 2
[[strategies]]
name = "ng"
draft = "ngram"
[sweep]
k = [3]
regimes = ["cached"]
"""
    prompts = [TaskPrompts("a", ("p0", "p1"))]
    greedy = {c.key for c in expand(parse_spec(base), prompts) if c.kind == "sweep"}
    spec = parse_spec(base + "temperatures = [0, 0.8]\ntop_p = 0.9\n")
    both = [c for c in expand(spec, prompts) if c.kind == "sweep"]
    assert len(both) == spec.cell_counts()["sweep"] == 4
    assert {c.key for c in both if c.temperature == 0} == greedy  # T = 0 keys are the greedy ones
    hot = [c for c in both if c.temperature == 0.8]
    assert all(c.params.top_p == 0.9 and isinstance(c.params.seed, int) for c in hot)
    assert len({c.params.seed for c in hot}) == 2  # one stream per cell


def test_the_artifact_registry_is_the_one_list_of_artifact_kinds():
    from storage.models import CELL_KINDS
    from storage.store import ACCELERATOR_ARTIFACT_KINDS, ARTIFACT_KINDS
    from workers.training.artifacts import KINDS, chain, producer
    from workers.training.builders import BUILDERS

    assert set(CELL_KINDS) == {k.cell_kind for k in KINDS} | {"costmodel", "reference", "sweep", "replay"}
    assert set(ARTIFACT_KINDS) | set(ACCELERATOR_ARTIFACT_KINDS) == {k.cell_kind for k in KINDS}
    assert set(BUILDERS) == {k.cell_kind for k in KINDS if k.builder}
    assert [k.cell_kind for k in chain("ibase", distilled=False)] == ["train"]
    assert [k.cell_kind for k in chain("ibase", distilled=True)] == ["label", "distill"]
    with pytest.raises(SpecError, match="no builder for artifact 'suffix_tree'"):
        producer("suffix_tree")
