"""Replay's Ray task: a batch of replay jobs of one strategy on a CPU worker, its draft's artifacts fetched to that
node first (`workers.training.ray_tasks.ensure_local`). The driver's own task (`orchestrator.run.replay_rows`) runs
`replay_here` and builds the cells' rows beside it."""

from __future__ import annotations

import ray

from workers.training.ray_tasks import ensure_local, this_node


def replay_here(jobs: list, tokenizer: str) -> list:
    """A batch of replay jobs of one strategy in this process (`workers.replay.batch.run_replay_batch`): the draft's
    artifacts are fetched to this node first; each outcome names this node."""
    from workers.replay.batch import run_replay_batch  # deferred: it imports torch

    for path in sorted({p for job in jobs for p in job.cell.artifacts.values()}):
        ensure_local(path)
    return run_replay_batch(jobs, tokenizer, worker=this_node())


@ray.remote(num_cpus=1)
def replay_task(jobs: list, tokenizer: str) -> list:
    """`replay_here` on a CPU worker: each job's outcome (its record or its error)."""
    return replay_here(jobs, tokenizer)
