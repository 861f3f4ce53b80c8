"""The pure scheduler: batching, in-flight limit, artifact dependencies, retries (no Ray, no SQL)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from orchestrator.run.scheduler import Scheduler
from storage.cell_spec import CellParams, CellSpec


def cell(i: int, kind: str = "sweep", strategy: str | None = "s", needs: tuple = (), **kw) -> CellSpec:
    return CellSpec(
        id=i,
        key=f"k{i}",
        kind=kind,
        strategy=strategy,
        task="t",
        prompt_index=i,
        k=3,
        regime="uncached",
        params=CellParams(needs=dict(needs)),
        **kw,
    )


def test_references_first_then_batches_of_one_strategy_up_to_batch_size():
    cells = [
        cell(1, strategy="b"),
        cell(2, strategy="a"),
        cell(3, strategy="a"),
        cell(4, strategy="a"),
        cell(5, kind="reference", strategy=None),
    ]
    cells = [c if c.kind == "reference" else replace(c, prompt_index=0) for c in cells]  # one prompt
    s = Scheduler(cells, batch_size=2, max_attempts=3, in_flight=5)
    assert [c.id for c in s.next_batch()] == [5]
    assert [c.id for c in s.next_batch()] == [2, 3]
    assert [c.id for c in s.next_batch()] == [4]  # the next strategy starts a new batch
    assert [c.id for c in s.next_batch()] == [1]
    assert s.next_batch() == []


GRID = [
    (st, k, rg, p)
    for rg in ("uncached", "cached")
    for st, k in (("olifant", 8), ("ngram", 3), ("plain", 0), ("olifant", 3))
    for p in (1, 0)
]


def batches_of(order: str) -> list[list[tuple]]:
    cells = [
        CellSpec(id=i, key=f"k{i}", kind="sweep", strategy=st, task="t", prompt_index=p, k=k, regime=rg)
        for i, (st, k, rg, p) in enumerate(GRID, start=1)
    ]
    s = Scheduler(cells, batch_size=100, max_attempts=1, in_flight=100, order=order)
    batches = []
    while batch := s.next_batch():
        batches.append([(c.regime, c.prompt_index, c.strategy, c.k) for c in batch])
    return batches


def test_paired_order_runs_every_strategy_of_a_prompt_back_to_back_plain_first():
    """A batch holds one strategy's k values for one prompt; the strategies compared are timed seconds apart."""
    assert batches_of("paired") == [
        [("cached", 0, "plain", 0)],
        [("cached", 0, "ngram", 3)],
        [("cached", 0, "olifant", 3), ("cached", 0, "olifant", 8)],
        [("cached", 1, "plain", 0)],
        [("cached", 1, "ngram", 3)],
        [("cached", 1, "olifant", 3), ("cached", 1, "olifant", 8)],
        [("uncached", 0, "plain", 0)],
        [("uncached", 0, "ngram", 3)],
        [("uncached", 0, "olifant", 3), ("uncached", 0, "olifant", 8)],
        [("uncached", 1, "plain", 0)],
        [("uncached", 1, "ngram", 3)],
        [("uncached", 1, "olifant", 3), ("uncached", 1, "olifant", 8)],
    ]


def test_strategy_order_runs_each_strategys_cells_together():
    assert batches_of("strategy") == [
        [
            ("cached", 0, "ngram", 3),
            ("cached", 1, "ngram", 3),
            ("uncached", 0, "ngram", 3),
            ("uncached", 1, "ngram", 3),
        ],
        [
            ("cached", 0, "olifant", 3),
            ("cached", 1, "olifant", 3),
            ("cached", 0, "olifant", 8),
            ("cached", 1, "olifant", 8),
            ("uncached", 0, "olifant", 3),
            ("uncached", 1, "olifant", 3),
            ("uncached", 0, "olifant", 8),
            ("uncached", 1, "olifant", 8),
        ],
        [
            ("cached", 0, "plain", 0),
            ("cached", 1, "plain", 0),
            ("uncached", 0, "plain", 0),
            ("uncached", 1, "plain", 0),
        ],
    ]


def test_unknown_order_refused():
    with pytest.raises(ValueError, match="unknown sweep order 'random'; one of paired, strategy"):
        Scheduler([], batch_size=1, max_attempts=1, order="random")


def test_in_flight_limit_and_attempts_counted_on_dispatch():
    s = Scheduler([cell(i) for i in range(6)], batch_size=2, max_attempts=1, in_flight=2)
    a, b = s.next_batch(), s.next_batch()
    assert len(a) == len(b) == 2 and s.next_batch() == []  # two batches in flight: the third waits
    assert all(c.attempts == 1 for c in a + b) and s.is_final(a[0])
    s.batch_finished()
    assert len(s.next_batch()) == 2


def test_cells_wait_for_their_artifact_and_fail_with_it():
    art = cell(10, kind="train", strategy=None)
    other = cell(11, kind="train", strategy=None)
    needy = [cell(1, needs=(("ibase", "k10"),)), cell(2, needs=(("ibase", "k10"),))]
    free = cell(3, strategy="z")
    s = Scheduler([art, other, *needy, free], batch_size=8, max_attempts=2, overlap=True)
    started = s.start_artifacts()
    assert {c.id for c in started} == {10, 11} and all(c.attempts == 1 for c in started)
    assert [c.id for c in s.next_batch()] == [3]  # overlap: ready cells run while artifacts build
    assert s.next_batch() == []  # the rest need k10
    assert {c.id for c in s.artifact_failed(started[0])} == {1, 2}
    assert not s.queue and s.busy()  # k11 still building


def test_no_timed_cells_beside_training_unless_overlap():
    s = Scheduler([cell(10, kind="train", strategy=None), cell(1)], batch_size=8, max_attempts=2)
    art = s.start_artifacts()[0]
    assert s.next_batch() == [] and s.busy()
    s.artifact_built(art)
    assert [c.id for c in s.next_batch()] == [1]


def test_built_artifacts_from_an_earlier_run_are_ready():
    s = Scheduler([cell(1, needs=(("ibase", "old"),))], batch_size=8, max_attempts=2, built={"old": "/x.igtree"})
    assert [c.id for c in s.next_batch()] == [1]


def test_retry_requeues_at_the_back_or_front_and_artifacts_are_resubmitted():
    s = Scheduler([cell(1), cell(2), cell(3)], batch_size=1, max_attempts=3, in_flight=9)
    first = s.next_batch()[0]
    s.retry(first)
    assert [c.id for c in s.queue] == [2, 3, 1]
    s.retry(first, front=True)
    assert s.queue[0].id == 1
    art = cell(10, kind="train", strategy=None)
    t = Scheduler([art], batch_size=1, max_attempts=3)
    built = t.start_artifacts()[0]
    t.retry(built)
    assert [c.attempts for c in t.start_artifacts()] == [2]


def test_cells_whose_artifact_will_never_exist_are_orphans_not_a_hang():
    s = Scheduler([cell(1, needs=(("ibase", "gone"),)), cell(2)], batch_size=8, max_attempts=2)
    assert [c.id for c in s.orphans] == [1]
    assert [c.id for c in s.next_batch()] == [2]
    s.batch_finished()
    assert not s.busy()


def test_one_batch_in_flight_where_a_cpu_worker_takes_every_core():
    from orchestrator.run.accelerator_actor import IN_FLIGHT, batches_in_flight

    assert IN_FLIGHT == 2
    assert batches_in_flight("cpu", threads=2, cpus=2) == 1  # the driver's bookkeeping would share a timed core
    assert batches_in_flight("cpu", threads=1, cpus=2) == 2  # overlap: a core is left over
    assert batches_in_flight("cuda:0", threads=16, cpus=16) == 2
    assert batches_in_flight("mps", threads=8, cpus=8) == 2


def test_worker_threads_are_the_specs_or_every_core_less_one_with_work_beside_it():
    from orchestrator.run.accelerator_actor import worker_threads

    assert worker_threads(None, beside=False, cpus=8) == 8
    assert worker_threads(None, beside=True, cpus=8) == 7
    assert worker_threads(None, beside=True, cpus=1) == 1
    assert worker_threads(1, beside=False, cpus=8) == 1
    assert worker_threads(3, beside=True, cpus=8) == 3


def test_the_round_cost_table_is_measured_on_quiet_cores():
    """The table waits while replays run on the CPU workers, and while it is measured no training or replay starts
    (it would time a loaded machine, unlike the timed cells it predicts); with `overlap` both may run beside it."""
    train = cell(1, kind="train", strategy=None, corpus="c")
    cells = [train, cell(2, kind="costmodel", strategy=None), cell(3, kind="replay", needs=(("costmodel", "k2"),))]
    s = Scheduler(cells, batch_size=4, max_attempts=3, in_flight=2)
    s.running_replays = 1  # a replay of an earlier start still running
    assert s.next_batch() == []  # the table waits for it
    s.running_replays = 0
    (table,) = s.next_batch()
    assert table.kind == "costmodel" and s.measuring == {table.key}
    assert s.start_artifacts() == [] and s.next_replay_batch(4) == []  # nothing starts beside it
    s.batch_finished([table])
    s.artifact_built(table)  # done: a prerequisite of the replays
    assert not s.measuring and [c.id for c in s.start_artifacts()] == [1]
    beside = Scheduler(cells, batch_size=4, max_attempts=3, in_flight=2, overlap=True)
    beside.running_replays = 1
    assert [c.kind for c in beside.next_batch()] == ["costmodel"] and [c.id for c in beside.start_artifacts()] == [1]
