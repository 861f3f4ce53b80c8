"""The single accelerator worker: a thin Ray actor over `workers.runner.SweepRunner`.

It holds the custom `accelerator` resource, so exactly one runs per cluster and timed generations never
share the device. It is never restarted by Ray: when it dies, the driver starts a fresh one and retries the
cells it held. One call runs a batch of cells and returns their results with the power samples taken.
"""

from __future__ import annotations

import logging
import traceback

import ray

from workers.runner import CellResult, RunnerConfig, SweepRunner

logger = logging.getLogger(__name__)


@ray.remote(resources={"accelerator": 1}, num_cpus=1, max_restarts=0, max_task_retries=0)
class AcceleratorWorker:
    """Loads the verifier once; `run_batch` runs cells in order and measures their energy."""

    def __init__(self, cfg: RunnerConfig):
        self.runner = SweepRunner(cfg)

    def info(self) -> dict:
        return self.runner.info()

    def run_batch(self, cells: list[dict]) -> dict:
        """Results for `cells` (a failure is recorded per cell, never raised) and the raw power samples."""
        results = []
        for cell in cells:
            try:
                results.append(self.runner.run(cell))
            except Exception as err:  # actor boundary: the failure becomes data and the batch goes on
                logger.warning("cell %s failed: %s", cell["key"][:12], err)
                results.append(CellResult(key=cell["key"], ok=False, worker=self.runner.worker,
                                          error=f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=4)}"))
        return {"results": self.runner.attach_energy(results), "samples": self.runner.drain_samples()}

    def close(self) -> None:
        self.runner.close()
