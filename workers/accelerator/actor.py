"""The single accelerator worker: a thin Ray actor over `workers.accelerator.runner.SweepRunner`.

It holds the custom `accelerator` resource, so exactly one runs per cluster and timed generations never
share the device. It is never restarted by Ray: when it dies, the driver starts a fresh one and retries the
jobs it held. One call runs a batch of `SweepJob`s (or `LabelJob`s: verifier labels for a corpus) and returns a `BatchOutcome` with the power samples taken.
"""

from __future__ import annotations

import logging
import traceback

import ray

from workers.accelerator.runner import RunnerConfig, SweepRunner
from workers.contracts import BatchOutcome, JobOutcome, LabelJob, SweepJob
from workers.training.ray_tasks import ensure_local, this_node

logger = logging.getLogger(__name__)


@ray.remote(resources={"accelerator": 1}, num_cpus=1, max_restarts=0, max_task_retries=0)
class AcceleratorWorker:
    """Loads the verifier once; `run_batch` runs jobs in order and measures their energy."""

    def __init__(self, cfg: RunnerConfig):
        self.runner = SweepRunner(cfg)
        self.runner.worker = f"{this_node()} {self.runner.worker}"  # cells.worker: the Ray node id first

    def info(self) -> dict:
        return self.runner.info()

    def run_batch(self, jobs: list[SweepJob | LabelJob]) -> BatchOutcome:
        """Outcomes for `jobs` (a failure is recorded per job, never raised) and the raw power samples."""
        outcomes = []
        try:
            self.runner.prefetch_references(jobs)  # references together, each checked alone; a failure: one by one
        except Exception as err:  # noqa: BLE001
            logger.warning("batched references failed (%s); making them one by one", err)
        for job in jobs:
            try:
                for path in getattr(job, "artifacts", {}).values():  # built on another node: copied here once
                    ensure_local(path)
                outcomes.append(self.runner.run(job))
            except Exception as err:  # actor boundary: the failure becomes data and the batch goes on
                logger.warning("job %s failed: %s", job.key[:12], err)
                outcomes.append(
                    JobOutcome(
                        key=job.key,
                        worker=self.runner.worker,
                        error=f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=4)}",
                    )
                )
        return BatchOutcome(outcomes=tuple(self.runner.attach_energy(outcomes)), samples=self.runner.drain_samples())

    def close(self) -> None:
        self.runner.close()
