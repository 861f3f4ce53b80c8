"""The streamed grid (`iter_cells`, `grid_keys`, `check_unique_keys`) against the expansion as it was before it
streamed: every cell's order, key, columns and params the same, on grids of every feature (replay, the timed sample,
sampling, k = "auto", trees, distilled corpora, a strategy's own tasks and regimes, a draft that cannot be replayed)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from orchestrator.run import cells as grid
from orchestrator.run.cell_keys import PROMPT, PromptKeys, content_key, prompt_json
from orchestrator.run.prepare import check_unique, check_unique_keys, link_references
from orchestrator.run.spec import parse_spec
from storage.cell_spec import CellParams, CellSpec
from workers.errors import SpecError

# ----------------------------------------------------------------------------- the expansion before it streamed


def _old_coordinate_cells(spec, s, text, coords, draft, needs, costs):
    temperature = coords["temperature"]
    sampling = grid.sampling_identity(spec, temperature)
    ident = {
        "kind": "sweep",
        "verifier": grid.verifier_identity(spec),
        "prompt": text,
        "k": coords["k"],
        "regime": coords["regime"],
        "max_new_tokens": spec.sweep.max_new_tokens,
        **draft,
        **sampling,
    }
    key = content_key(ident)
    cell_needs = {**needs, grid.COST_ROLE: costs} if s.auto and costs else needs
    params = CellParams(prompt=text, options=s.options.model_dump(), needs=cell_needs)
    if sampling:
        params = replace(
            params, top_k=sampling["top_k"], top_p=sampling["top_p"], seed=int(key[:8], 16) ^ spec.experiment.seed
        )
    out = []
    if spec.sweep.replay and temperature == 0 and s.replayable:
        replay_params = replace(params, needs={**cell_needs, grid.COST_ROLE: costs})
        out.append(
            CellSpec(key=content_key({**ident, "kind": "replay"}), kind="replay", **coords, params=replay_params)
        )
    if spec.sweep.timed(coords["prompt_index"], temperature) or not s.replayable:
        out.append(CellSpec(key=key, kind="sweep", **coords, params=params))
    return out


def _old_sweep_cells(spec, prompts, artifacts, costs):
    out = []
    for s in (s for s in spec.strategies if s.runs_on(prompts.task)):
        needs = {role: artifacts[req].key for role, req in s.options.requires().items()}
        corpus = next((r.corpus for r in s.options.requires().values()), None)
        draft = {"draft": s.draft, **s.options.identity(), **needs}
        for i, text in enumerate(prompts.texts):
            for k, regime, temperature in itertools.product(
                s.ks(spec.sweep.k), s.regimes_in(spec.sweep.regimes), spec.sweep.temperatures
            ):
                coords = dict(
                    strategy=s.name,
                    draft=s.draft,
                    task=prompts.task,
                    corpus=corpus,
                    prompt_index=i,
                    k=k,
                    regime=regime,
                    temperature=temperature,
                )
                out += _old_coordinate_cells(spec, s, text, coords, draft, needs, costs)
    return out


def _old_timed_sample(spec, cells):
    n = spec.sweep.timed_coordinates
    if not spec.sweep.replay or n is None:
        return cells
    coord = grid.coordinate
    replayed = {coord(c) for c in cells if c.kind == "replay"}
    drafts = {coord(c): c.draft or "" for c in cells if c.kind == "sweep" and coord(c) in replayed}
    plain = {c for c in drafts if c[2] == 0}
    others = {c: d for c, d in drafts.items() if c not in plain}
    chosen = plain | set(grid.stratified(spec.experiment.seed, others, n - len(plain)))
    return [c for c in cells if c.kind != "sweep" or coord(c) not in replayed or coord(c) in chosen]


def old_expand(spec, prompts):
    artifacts = grid.artifact_cells(spec)
    prompt = next((t for p in prompts for t in p.texts), None)
    costs = grid.cost_model_cell(spec, prompt)
    refs = [c for p in prompts for c in grid.reference_cells(spec, p)]
    sweeps = [c for p in prompts for c in _old_sweep_cells(spec, p, artifacts, costs.key if costs else None)]
    tables = [] if costs is None else [costs, *grid.timing_table_cells(spec, prompt)]
    return list(artifacts.values()) + tables + refs + _old_timed_sample(spec, sweeps)


# ----------------------------------------------------------------------------- grids of every feature

HEAD = """
[experiment]
name = "g"
seed = 3
[verifier]
model = "org/model"
[[corpora]]
name = "c"
path = "/data/c.txt"
[[corpora]]
name = "d"
path = "/data/c.txt"
labels = "verifier"
label_max_tokens = 100
[[tasks]]
name = "t"
path = "/data/t.txt"
[[tasks]]
name = "u"
path = "/data/u.txt"
prompt_words = 30
[[tasks]]
name = "e"
path = "/data/e.txt"
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
n = 3
tasks = ["t"]
regimes = ["cached"]
[[strategies]]
name = "suffix-remember"
draft = "suffix"
remember_outputs = true
[[strategies]]
name = "lookup"
draft = "lookup"
k = [2, 7]
"""
GREEDY = """
[[strategies]]
name = "tree"
draft = "olifant"
corpus = "d"
tree = 8
[[strategies]]
name = "hybrid-auto"
draft = "hybrid"
corpus = "d"
k = "auto"
"""
SWEEPS = {
    "plain": '[sweep]\nk = [1, 3]\nregimes = ["uncached", "cached"]',
    "replay": '[sweep]\nk = [1, 3, 5]\nregimes = ["uncached", "cached", "cached-standard"]\nreplay = true',
    "timed": "[sweep]\nk = [1, 2, 3, 4, 5, 6]\nreplay = true\ntimed_prompts = 2\ntimed_coordinates = 7",
    "sampled": "[sweep]\nk = [2, 4]\nreplay = true\ntimed_prompts = 1\ntemperatures = [0.0, 0.8]\ntop_k = 5",
    "sampled-no-replay": "[sweep]\nk = [2]\ntemperatures = [0.0, 1.0]\ntop_p = 0.9\ntimed_prompts = 2",
}
TEXTS = ("def f(x):\n    return x", 'a "quoted" \\ prompt', "naïve ünïcode — “quotes” \u2028 \x01 tab\tend", "4th")
PROMPTS = [grid.TaskPrompts("t", TEXTS), grid.TaskPrompts("u", TEXTS[1:] + ("only in u",)), grid.TaskPrompts("e", ())]


def spec_of(name: str):
    return parse_spec(HEAD + ("" if name.startswith("sampled") else GREEDY) + SWEEPS[name])


def row(c: CellSpec) -> tuple:
    p = c.params
    return (c.key, c.kind, c.strategy, c.draft, c.task, c.corpus, c.prompt_index, c.k, c.regime, c.temperature,
            p.to_json(), list(p.needs.items()), list(p.options.items()))  # fmt: skip


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_the_streamed_grid_is_the_grid_as_it_was(name):
    spec, prompts = spec_of(name), PROMPTS  # task e has no prompt: no cell
    before = old_expand(spec, prompts)
    assert len({c.kind for c in before}) >= 3
    assert [row(c) for c in grid.expand(spec, prompts)] == [row(c) for c in before]
    assert list(grid.grid_keys(spec, prompts)) == [c.key for c in before]
    linked = list(grid.iter_cells(spec, prompts, linked=True))
    assert [row(c) for c in linked] == [row(c) for c in link_references(before)]
    assert all(c.params.reference for c in linked if c.kind in ("sweep", "replay"))


def test_the_timed_sample_is_the_same_and_leaves_the_rest_replayed():
    spec = spec_of("timed")
    cells = grid.expand(spec, PROMPTS)
    timed = {grid.coordinate(c) for c in cells if c.kind == "sweep" and c.strategy != "suffix-remember"}
    assert len(timed) == 7 and {c for c in timed if c[0] == "plain"} == {
        ("plain", t, 0, r, 0.0) for t in ("t", "u") for r in ("uncached", "cached")
    }
    assert {c.prompt_index for c in cells if c.kind == "sweep" and c.strategy != "suffix-remember"} == {0, 1}


# ----------------------------------------------------------------------------- keys and the uniqueness check


@pytest.mark.parametrize("text", [*TEXTS, "", "\x00greenspec:prompt\x00", "\ud800 lone surrogate"])
def test_prompt_keys_hash_what_content_key_hashes(text):
    payload = {"kind": "sweep", "k": 3, "regime": "cached", "verifier": {"model": "m", "revision": None}}
    keys = PromptKeys({**payload, "prompt": PROMPT})
    assert keys.key(prompt_json(text)) == content_key({**payload, "prompt": text})


def test_prompt_keys_with_the_mark_elsewhere_or_the_prompt_taken_hash_whole():
    odd = {"kind": "sweep", "option": PROMPT, "prompt": PROMPT}
    assert PromptKeys(odd).key(prompt_json("p")) == content_key({**odd, "prompt": "p"})
    taken = {"kind": "sweep", "prompt": "an option named prompt"}  # a draft option overrode the prompt
    assert PromptKeys(taken).key(prompt_json("p")) == content_key(taken)


TWIN = HEAD.replace('name = "lookup"', 'name = "ng2"\ndraft = "ngram"\nn = 3\n[[strategies]]\nname = "lookup"')
DISTINCT = [grid.TaskPrompts("t", ("a b", "c d")), grid.TaskPrompts("u", ("e f",))]


@pytest.mark.parametrize(
    ("text", "prompts", "names"),
    [(TWIN, DISTINCT, ("'ng'", "'ng2'")), (HEAD, PROMPTS[:2], ("tasks 't' (prompt 1) and 'u' (prompt 0)",))],
)
def test_the_streamed_uniqueness_check_refuses_as_the_listed_one(text, prompts, names):
    spec = parse_spec(text + SWEEPS["replay"])
    with pytest.raises(SpecError) as listed:
        check_unique(old_expand(spec, prompts))
    with pytest.raises(SpecError) as streamed:
        check_unique_keys(spec, prompts)
    assert str(streamed.value) == str(listed.value) and all(n in str(listed.value) for n in names)


def test_a_unique_grid_passes():
    check_unique_keys(spec_of("replay"), DISTINCT)


def test_keys_that_only_begin_alike_are_no_collision(monkeypatch):
    spec = spec_of("replay")
    keys = list(grid.grid_keys(spec, DISTINCT))
    alike = [keys[0][:16] + k[16:] for k in keys]  # every key's first 64 bits the same, the keys all distinct
    monkeypatch.setattr("orchestrator.run.prepare.grid_keys", lambda *_: iter(alike))
    check_unique_keys(spec, DISTINCT)
