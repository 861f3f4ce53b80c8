"""The sweep loop's Ray side: submits artifact builds, accelerator batches and replays, and collects what finished.

Nothing here touches the database. `collect` turns each finished object ref into plain data (`Built`,
`BatchDone`, `BatchLost`, `Replayed`), Ray's task and actor errors included, for `orchestrator.run.results`
to store. The accelerator worker runs batches in submission order, so when it dies only the oldest of its
unfinished batches was running: `BatchLost.running` says which one that was.

Example:
    >>> d = Dispatcher(spec, opts)
    >>> d.submit_batch(cells, jobs)                  # starts the accelerator worker on first use
    >>> for event in d.collect(timeout_s=1.0): ...   # what finished within a second
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

import ray
from ray.actor import ActorHandle

from orchestrator.run.accelerator_actor import close_actor, start_actor
from orchestrator.run.artifact_tasks import submit_artifact
from orchestrator.run.events import BatchDone, BatchLost, Built, Event, Replayed
from orchestrator.run.options import RunOptions
from orchestrator.run.replay_rows import replay_rows_task
from orchestrator.run.spec import Spec
from storage.cell_spec import CellSpec
from storage.generation_row import RowCell
from workers.contracts import BatchOutcome, LabelJob, ReplayJob, SweepJob

logger = logging.getLogger(__name__)

TASK_ERRORS = (ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError)
ACTOR_ERRORS = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.WorkerCrashedError)


def _cause(err: Exception) -> str:
    cause = getattr(err, "cause", None) or err
    return f"{type(cause).__name__}: {cause}"


class Dispatcher:
    """The object refs in flight (artifact builds, accelerator batches, replays) and the accelerator worker."""

    def __init__(self, spec: Spec, opts: RunOptions):
        self.spec, self.opts = spec, opts
        self.builds: dict[ray.ObjectRef, CellSpec] = {}
        self.batches: dict[ray.ObjectRef, tuple[list[CellSpec], ActorHandle]] = {}  # -> (cells, the actor)
        self.replaying: dict[ray.ObjectRef, list[CellSpec]] = {}
        self.actor: ActorHandle | None = None
        self._seq: dict[ray.ObjectRef, int] = {}  # submission order (the actor runs batches in this order)
        self._counter = itertools.count()
        self._died_at: dict[int, int] = {}  # id(dead actor) -> submission number of the batch it died in
        self._predictor: tuple = (None, None)  # (the predictor's table, its object ref): put once per table

    def busy(self) -> bool:
        return bool(self.builds or self.batches or self.replaying)

    def cpus(self) -> int:
        """The cluster's CPUs: how many replay batches may run at once."""
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    # -- submitting
    def submit_artifact(self, cell: CellSpec, paths: dict[str, str]) -> None:
        self.builds[submit_artifact(self.spec, cell, paths)] = cell

    def ensure_actor(self) -> tuple[dict, int] | None:
        """Start the accelerator worker unless it runs: when started now, its `info()` and the batches to keep in
        flight; else None."""
        if self.actor is not None:
            return None
        self.actor, info, in_flight = start_actor(self.spec, self.opts)
        return info, in_flight

    def submit_batch(self, cells: list[CellSpec], jobs: list[SweepJob | LabelJob]) -> None:
        assert self.actor is not None, "ensure_actor first"
        ref = self.actor.run_batch.remote(jobs)
        self.batches[ref] = (cells, self.actor)
        self._seq[ref] = next(self._counter)

    def submit_replays(self, cells: list[CellSpec], jobs: list[ReplayJob], tokenizer: str, exp_id: int, predictor):
        """A replay task for `jobs` (`cells[i]`'s is `jobs[i]`), which builds their rows predicted by `predictor`."""
        table = None if predictor is None else predictor.table
        if self._predictor[0] is not table:
            self._predictor = (table, None if predictor is None else ray.put(predictor))
        rows = [RowCell.of(c) for c in cells]
        self.replaying[replay_rows_task.remote(jobs, rows, tokenizer, exp_id, self._predictor[1])] = cells

    def run_now(self, jobs: list[SweepJob], wait_s: float, between: Callable[[], None]) -> BatchOutcome | None:
        """Run `jobs` on the accelerator worker with nothing else in flight and wait for them, calling `between` each
        `wait_s` seconds (an interrupt check); None when the worker died (the next `ensure_actor` replaces it)."""
        assert self.actor is not None and not self.busy(), "ensure_actor first, with nothing in flight"
        ref = self.actor.run_batch.remote(jobs)
        while not ray.wait([ref], timeout=wait_s)[0]:
            between()
        try:
            return ray.get(ref)
        except ACTOR_ERRORS as err:
            logger.warning("accelerator worker died during second timings (%s); a resume runs them", _cause(err))
            ray.kill(self.actor, no_restart=True)
            self.actor = None
            return None

    # -- collecting
    def collect(self, timeout_s: float) -> list[Event]:
        """What finished within `timeout_s` (at most one ref; [] when nothing did or nothing is in flight)."""
        pending = [*self.builds, *self.batches, *self.replaying]
        if not pending:
            return []
        ready, _ = ray.wait(pending, num_returns=1, timeout=timeout_s)
        return [self._finished(ref) for ref in ready]

    def _finished(self, ref: ray.ObjectRef) -> Event:
        if ref in self.builds:
            cell = self.builds.pop(ref)
            try:
                return Built(cell, info=ray.get(ref))
            except TASK_ERRORS as err:
                return Built(cell, error=_cause(err))
        if ref in self.replaying:
            cells = self.replaying.pop(ref)
            try:
                out = ray.get(ref)
                return Replayed(cells, out.failed, out.rows)
            except TASK_ERRORS as err:
                return Replayed(cells, [], [], error=_cause(err))
        cells, actor = self.batches.pop(ref)
        try:
            out: BatchOutcome = ray.get(ref)
        except ACTOR_ERRORS as err:
            return BatchLost(cells, self._worker_died(ref, actor, len(cells)), type(err).__name__)
        self._seq.pop(ref)
        return BatchDone(cells, out)

    def _worker_died(self, ref: ray.ObjectRef, actor: ActorHandle, n_cells: int) -> bool:
        """The worker died during a batch: a fresh worker (verifier reloaded) takes the next batches. True if `ref`
        was the batch it was running (the oldest unfinished one it had)."""
        logger.warning("accelerator worker died during a batch of %d cells; retrying them", n_cells)
        if actor is self.actor:
            ray.kill(actor, no_restart=True)
            self.actor = None
        died_at = self._died_at.setdefault(
            id(actor), min([self._seq[ref], *(self._seq[r] for r, (_, a) in self.batches.items() if a is actor)])
        )
        return self._seq.pop(ref) == died_at

    # -- stopping
    def cancel(self) -> None:
        """Ctrl-C: stop training tasks, replays and the worker at once (its batch in flight is lost)."""
        for ref in [*self.builds, *self.replaying]:
            ray.cancel(ref, force=True)
        if self.actor is not None:
            ray.kill(self.actor, no_restart=True)  # its cells are re-run on resume
            self.actor = None

    def close(self) -> None:
        if self.actor is not None:
            close_actor(self.actor)
            self.actor = None
