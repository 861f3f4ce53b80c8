"""The pure scheduler: artifact chains (sweep -> distill -> label), label cells on the accelerator queue."""

from __future__ import annotations

from orchestrator.run.scheduler import Scheduler
from storage.cell_spec import CellParams, CellSpec


def cells():
    """label L (accelerator) -> distill D (CPU) -> sweeps S1, S2; train T -> sweep S3; a reference R."""
    return [
        CellSpec(id=1, key="L", kind="label", corpus="c"),
        CellSpec(id=2, key="D", kind="distill", corpus="c", params=CellParams(needs={"labels": "L"})),
        CellSpec(id=3, key="T", kind="train", corpus="t"),
        CellSpec(id=4, key="R", kind="reference", task="x", prompt_index=0),
        CellSpec(id=5, key="S1", kind="sweep", strategy="distilled", k=3, params=CellParams(needs={"ibase": "D"})),
        CellSpec(id=6, key="S2", kind="sweep", strategy="distilled", k=5, params=CellParams(needs={"ibase": "D"})),
        CellSpec(id=7, key="S3", kind="sweep", strategy="olifant", k=3, params=CellParams(needs={"ibase": "T"})),
    ]


def test_chain_runs_label_then_distill_then_its_sweeps():
    s = Scheduler(cells(), batch_size=8, max_attempts=2, in_flight=1)
    first = s.start_artifacts()
    assert [c.key for c in first] == ["T"]  # D waits for its labels
    assert s.next_batch() == []  # nothing timed beside training
    s.artifact_built(first[0])
    assert [c.key for c in s.next_batch()] == ["R"]  # references first (a replayed run's replays wait for them)
    s.batch_finished()
    label = s.next_batch()
    assert [c.key for c in label] == ["L"]  # then the labels
    assert s.start_artifacts() == []
    s.batch_finished()
    s.artifact_built(label[0])
    distill = s.start_artifacts()
    assert [c.key for c in distill] == ["D"] and distill[0].attempts == 1
    assert s.next_batch() == []  # the distill build runs: the accelerator waits
    s.artifact_built(distill[0])
    order = []
    while batch := s.next_batch():
        order.append([c.key for c in batch])
        s.batch_finished()
    assert order == [["S1", "S2"], ["S3"]]
    assert not s.busy()


def test_sweeps_wait_for_their_artifact_while_others_run():
    s = Scheduler(cells(), batch_size=8, max_attempts=2, in_flight=2)
    s.artifact_built(s.start_artifacts()[0])  # T built, L and D not yet
    got = []
    while batch := s.next_batch():
        got += [c.key for c in batch]
        s.batch_finished()
    assert got == ["R", "L", "S3"]  # S1, S2 wait for D
    assert [c.key for c in s.queue] == ["S1", "S2"] and s.busy()


def test_failed_label_fails_its_distill_and_sweeps():
    s = Scheduler(cells(), batch_size=8, max_attempts=1, in_flight=2)
    s.artifact_built(s.start_artifacts()[0])
    s.next_batch()  # the reference
    label = s.next_batch()[0]
    assert label.kind == "label" and s.is_final(label)
    gone = s.artifact_failed(label)
    assert sorted(c.key for c in gone) == ["D", "S1", "S2"]
    assert s.artifacts == [] and [c.key for c in s.queue] == ["S3"]


def test_label_retry_goes_back_to_the_accelerator_queue():
    s = Scheduler(cells(), batch_size=8, max_attempts=3)
    s.artifact_built(s.start_artifacts()[0])
    s.next_batch()  # the reference
    s.batch_finished()
    label = s.next_batch()[0]
    s.batch_finished()
    s.retry(label, front=True)
    assert s.queue[0].key == "L" and s.queue[0].kind == "label"
