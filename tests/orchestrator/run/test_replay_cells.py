"""Grid expansion with replay: every greedy cell replayed (needing its reference and the cost model), the timed
cells cut to `timed_prompts` and a seeded sample of `timed_coordinates`, sampled and stateful drafts always timed;
the replay queue of the scheduler (CPU batches of one strategy, waiting for their references)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from orchestrator.run.cells import COST_ROLE, TaskPrompts, coordinate, expand, stratified
from orchestrator.run.prepare import link_references
from orchestrator.run.scheduler import Scheduler, run_order, spread_turns
from orchestrator.run.spec import parse_spec
from orchestrator.run.sweep_grid import at_timing
from workers.decoding.passes import width_band

SPEC = """
[experiment]
name = "r"
[verifier]
model = "org/model"
[[corpora]]
name = "c"
path = "/data/c.txt"
[[tasks]]
name = "t"
path = "/data/t.txt"
prompts = 3
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "oli"
draft = "olifant"
corpus = "c"
[[strategies]]
name = "suffix-remember"
draft = "suffix"
remember_outputs = true
[sweep]
k = [3, 5]
regimes = ["uncached", "cached"]
{sweep}
"""
PROMPTS = [TaskPrompts("t", ("first prompt text", "second prompt text", "third prompt text"))]


def grid(sweep: str = "replay = true") -> list:
    return link_references(expand(parse_spec(SPEC.format(sweep=sweep)), PROMPTS))


def test_replay_replays_every_greedy_cell_and_times_none_by_default():
    cs = grid()
    kinds = Counter(c.kind for c in cs)
    # plain (1 k) and oli (2 k) in 2 regimes over 3 prompts are replayed; suffix with remember_outputs is timed only
    assert kinds == {"train": 1, "costmodel": 1, "reference": 3, "replay": (1 + 2) * 2 * 3, "sweep": 2 * 2 * 3}
    assert {c.strategy for c in cs if c.kind == "sweep"} == {"suffix-remember"}
    cost = next(c.key for c in cs if c.kind == "costmodel")
    refs = {c.params.prompt: c.key for c in cs if c.kind == "reference"}
    for c in (c for c in cs if c.kind == "replay"):
        needs = dict(c.needs)
        assert needs[COST_ROLE] == cost and needs["reference"] == refs[c.params.prompt] == c.params.reference
    assert len({c.key for c in cs}) == len(cs)  # a replay cell's key differs from its timed twin's


def test_timed_prompts_and_a_seeded_sample_of_coordinates():
    cs = grid("replay = true\ntimed_prompts = 2")
    timed = [c for c in cs if c.kind == "sweep" and c.strategy != "suffix-remember"]
    assert {c.prompt_index for c in timed} == {0, 1} and len(timed) == (1 + 2) * 2 * 2
    sample = grid("replay = true\ntimed_prompts = 1\ntimed_coordinates = 3")
    chosen = {coordinate(c) for c in sample if c.kind == "sweep" and c.strategy != "suffix-remember"}
    assert len(chosen) == 3 and {c for c in chosen if c[0] == "plain"} == {
        ("plain", "t", 0, r, 0.0) for r in ("uncached", "cached")
    }
    assert chosen == {
        coordinate(c)
        for c in grid("replay = true\ntimed_prompts = 1\ntimed_coordinates = 3")
        if c.kind == "sweep" and c.strategy != "suffix-remember"
    }  # the same sample every time


def test_without_replay_nothing_changes():
    cs = grid("")
    assert Counter(c.kind for c in cs) == {"train": 1, "reference": 3, "sweep": (1 + 2 + 2) * 2 * 3}


def test_sampled_cells_are_timed_not_replayed():
    cs = grid("replay = true\ntemperatures = [0.0, 0.7]")
    sampled = [c for c in cs if c.temperature]
    assert sampled and {c.kind for c in sampled} == {"sweep"}


def test_replays_wait_for_their_reference_and_go_in_batches_of_one_strategy():
    cs = [replace(c, id=i) for i, c in enumerate(grid())]
    cost = next(c for c in cs if c.kind == "costmodel")
    refs = [c for c in cs if c.kind == "reference"]
    s = Scheduler(cs, batch_size=8, max_attempts=2, built={c.key for c in cs if c.kind == "train"})
    assert s.next_replay_batch(2) == []  # neither the references nor the cost model are done
    s.artifact_built(cost)
    s.artifact_built(refs[0])
    batch = s.next_replay_batch(2)
    assert batch and {c.params.reference for c in batch} == {refs[0].key} and len({c.strategy for c in batch}) == 1
    assert all(c.attempts == 1 for c in batch)
    for r in refs[1:]:
        s.artifact_built(r)
    second = s.next_replay_batch(2)
    assert second and s.next_replay_batch(2) == []  # two replay tasks at most
    s.replay_finished()
    assert s.next_replay_batch(2)


def test_a_failed_reference_fails_its_replays():
    cs = [replace(c, id=i) for i, c in enumerate(grid())]
    ref = next(c for c in cs if c.kind == "reference")
    s = Scheduler(cs, batch_size=8, max_attempts=2)
    dependents = s.artifact_failed(ref)
    assert dependents and all(c.kind == "replay" and c.params.reference == ref.key for c in dependents)


def test_the_accelerator_waits_for_the_replays_only_once_nothing_else_is_left_for_it():
    cs = [replace(c, id=i) for i, c in enumerate(grid("replay = true\ntimed_prompts = 1"))]
    s = Scheduler(cs, batch_size=8, max_attempts=2, built={c.key for c in cs if c.kind == "train"})
    n_replays = sum(c.kind == "replay" for c in cs)
    assert not s.accelerator_waits_for_replays(1)  # the cost model and the references are still queued for it
    while batch := s.next_batch():  # cost model and references go to the accelerator; timed cells wait
        assert {c.kind for c in batch} <= {"costmodel", "reference"} and not any(map(at_timing, batch))
        assert not s.accelerator_waits_for_replays(1)  # a batch of it is in flight
        s.batch_finished()
        for c in batch:
            s.artifact_built(c)
    waiting = [c for c in s.queue if c.kind != "sweep"]  # the table measured again at the timings waits too
    assert len(waiting) == 2 and all(map(at_timing, waiting))  # in two turns
    assert [c.params.turn for c in waiting] == [0, 1]
    queued, timed = list(s.queue), len(s.queue) - 2  # the turns a quarter and three quarters through the timed cells
    assert queued.index(waiting[0]) == timed // 4 and queued.index(waiting[1]) - 1 == 3 * timed // 4
    assert s.accelerator_waits_for_replays(n_replays) and not s.accelerator_waits_for_replays(n_replays + 1)
    while s.next_replay_batch(10):
        pass
    assert not s.accelerator_waits_for_replays(1)  # every replay runs: none left for a freed CPU
    assert s.next_batch() == []  # the replays still run: nothing timed beside them
    while s.running_replays:
        s.replay_finished()
    before, batch = [], s.next_batch()  # the replays done: the timed cells, the table's first turn among them
    while batch and not any(map(at_timing, batch)):
        before += batch
        s.batch_finished(batch)
        batch = s.next_batch()
    assert {c.kind for c in before} == {"sweep"} and len(before) == timed // 4
    assert [c.key for c in batch] == [waiting[0].key]
    assert s.next_batch() == []  # measured alone: no timed cell queued (and shown running) behind it
    s.batch_finished(batch)
    s.artifact_built(batch[0])
    assert {c.kind for c in s.next_batch()} == {"sweep"}


def test_a_replayed_run_with_timed_cells_measures_its_table_again_at_the_timings():
    kinds = lambda cells: sorted(c.params.stage or "first" for c in cells if c.kind == "costmodel")  # noqa: E731
    assert kinds(grid("replay = true\ntimed_prompts = 1")) == ["first", "timing", "timing"]  # in two turns
    assert kinds(grid("replay = true\ntimed_prompts = 1\ntable_turns = 1")) == ["first", "timing"]
    assert kinds(grid("replay = true\ntimed_prompts = 1\ntable_at_timing = false")) == ["first"]
    assert kinds(grid("replay = true")) == ["first"]  # nothing timed: nothing to meet at the timings
    assert kinds(grid("replay = true\ntimed_prompts = 1\ntimed_coordinates = 0")) == ["first"]


def test_the_timed_sample_covers_every_stratum_before_any_twice():
    """Regime x width band x draft: with as many coordinates as strata, each stratum has one."""
    drafts = {(s, "t", k, r, 0.0): s for s in ("a", "b") for k in (1, 3, 4, 8) for r in ("uncached", "cached")}
    strata = {(c[3], width_band(c[0], c[2]), d) for c, d in drafts.items()}  # 2 regimes x 3 bands x 2 drafts
    picked = stratified(0, drafts, len(strata))
    assert len(strata) == 12 and {(c[3], width_band(c[0], c[2]), drafts[c]) for c in picked} == strata
    assert stratified(0, drafts, 13)[:12] == picked and len(stratified(0, drafts, 99)) == len(drafts)
    assert stratified(1, drafts, 12) != picked  # another seed, another sample of the k 2-4 band


def test_every_regime_and_band_is_timed_before_any_draft_is_added_to_one():
    """Five drafts, 3 regimes x 3 bands, 9 coordinates: one in every regime x band (its model error validated), not
    one draft's every band first."""
    names = ("ngram", "lookup", "suffix", "olifant", "rest")
    drafts = {(s, "t", k, r, 0.0): s for s in names for k in (1, 3, 8) for r in ("uncached", "cached", "c-std")}
    picked = stratified(0, drafts, 9)
    assert {(c[3], width_band(c[0], c[2])) for c in picked} == {(c[3], width_band(c[0], c[2])) for c in drafts}
    second = stratified(0, drafts, 18)[9:]  # the second round: in each regime x band another draft than its first
    first = {(c[3], width_band(c[0], c[2])): c[0] for c in picked}
    assert all(c[0] != first[(c[3], width_band(c[0], c[2]))] for c in second)


def test_the_turns_of_the_table_at_the_timings_spread_evenly_over_the_timed_cells():
    cs = [replace(c, id=i) for i, c in enumerate(grid("replay = true\ntimed_prompts = 2\ntable_turns = 3"))]
    queued = [c for c in spread_turns(sorted(cs, key=run_order)) if c.kind in ("sweep", COST_ROLE)]
    turns = [i for i, c in enumerate(queued) if at_timing(c)]
    timed = len(queued) - len(turns) - 1  # the first table opens the queue
    assert [queued[i].params.turn for i in turns] == [0, 1, 2]
    # timed cells before each: the middle of its third, so the turns' mean moment is the timings'
    assert [i - t - 1 for t, i in enumerate(turns)] == [timed // 6, timed // 2, 5 * timed // 6]
    resumed = [c for c in queued if not at_timing(c) or c.params.turn == 2][timed // 2 :]  # a resume, a turn left
    left = sum(c.kind == "sweep" for c in resumed)
    assert [at_timing(c) for c in spread_turns(resumed)].index(True) == left // 2  # the middle of what is left
    assert spread_turns([queued[turns[2]]]) == [queued[turns[2]]]
