"""The replay task the driver submits: a batch of replay jobs replayed on a CPU worker (`workers.replay.task`), and
the `generations` rows of the cells that replayed, built there too (`storage.generation_row.generation_rows`: their
metrics against the reference they replayed, their time and energy predicted by the run's round-cost table).

So the per-cell work (the metrics, the prediction, the JSON) runs on the CPU workers, which scale out, and the one
driver only inserts the rows it gets (`storage.results.insert_rows`) and marks their cells done: on a cluster of many
CPU nodes the driver, not the replays, sets a replayed study's rate (`python -m bench driver`).
"""

from __future__ import annotations

from dataclasses import dataclass

import ray

from storage.generation_row import RowCell, generation_rows
from workers.contracts import JobOutcome
from workers.replay.task import replay_here


@dataclass(frozen=True)
class ReplayRows:
    """What a replay task gives back: the outcomes of the jobs that failed (their errors), and for every other job
    (its cell's key, the worker, its row as `storage.generation_row.INSERT_COLUMNS` values)."""

    failed: list[JobOutcome]
    rows: list[tuple[str, str, tuple]]


def replay_rows(jobs: list, cells: list[RowCell], tokenizer: str, exp_id: int, predictor) -> ReplayRows:
    """Replay `jobs` here and build the rows of those that replayed (`cells[i]` is the cell of `jobs[i]`)."""
    outcomes = replay_here(jobs, tokenizer)
    done = [(job, cell, o) for job, cell, o in zip(jobs, cells, outcomes, strict=True) if o.ok]
    items = [(cell, o.generation, list(job.reference)) for job, cell, o in done]
    rows = generation_rows(exp_id, items, predictor)
    return ReplayRows([o for o in outcomes if not o.ok], [(o.key, o.worker, r) for (_, _, o), r in zip(done, rows)])


@ray.remote(num_cpus=1)
def replay_rows_task(jobs: list, cells: list[RowCell], tokenizer: str, exp_id: int, predictor) -> ReplayRows:
    """`replay_rows` on a CPU worker (`predictor`: the run's `storage.repredict.Predictor`, or None before a table,
    sent once per table through the object store)."""
    return replay_rows(jobs, cells, tokenizer, exp_id, predictor)
