"""The sweep loop's storage side: what a run starts from, and each finished task's results written as they arrive.

No Ray here: the dispatcher (`orchestrator.run.dispatcher`) hands over plain events. A failed cell is retried up
to `max_attempts`, then stored as failed with its error while the sweep goes on, and so are the cells that
needed it. A cell that finds its artifact missing or corrupt has the artifact rebuilt (once per run) without
losing an attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from orchestrator.run.artifact_tasks import ran_on
from orchestrator.run.cells import COST_ROLE
from orchestrator.run.events import BatchDone, BatchLost, Built, Event, Replayed
from orchestrator.run.options import Sessions
from orchestrator.run.replay_costs import PREREQUISITE_KINDS, ReplayCosts
from orchestrator.run.scheduler import Scheduler
from storage import store
from storage.cell_spec import CellSpec
from storage.db import Session
from storage.generation_row import decoded_lists
from storage.models import CELL_KINDS, Reference
from storage.queries import state_counts
from storage.replays import coordinate_of, done_keys, measured_coordinates, references_by_key, twin_rounds
from workers.contracts import BatchOutcome, GenerationRecord, JobOutcome, ReplayJob
from workers.replay.rounds import ROUND_LISTS, rounds_differ
from workers.training.artifacts import BY_CELL_KIND

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingWork:
    """What a run starts from: its pending cells, the built artifacts' files, the done prerequisites."""

    cells: list[CellSpec]
    paths: dict[str, str]  # artifact cell key -> file
    prerequisites: set[str]  # keys of done cells that replays and auto-k need
    rebuilt: set[str]  # artifact keys found missing on disk, put back to pending


def pending_work(Session: Sessions, exp_id: int) -> PendingWork:
    """Read the experiment's pending cells; a deleted instance base is requeued to be rebuilt, not failed on."""
    rebuilt = set()
    with Session() as s:
        for key in store.missing_artifacts(s, exp_id):
            logger.warning("artifact %s... is missing on disk; rebuilding it", key[:12])
            store.requeue_artifact(s, exp_id, key)
            rebuilt.add(key)
        s.commit()
        cells = store.pending_cells(s, exp_id, CELL_KINDS)  # artifacts of every kind, references, sweeps
        paths = store.artifact_paths(s, exp_id)
        prerequisites = done_keys(s, exp_id, PREREQUISITE_KINDS)
    return PendingWork(cells, paths, prerequisites, rebuilt)


class ResultWriter:
    """Writes a run's results and failures, keeping the scheduler told of what was built, retried or failed."""

    def __init__(self, Session: Sessions, exp_id: int, sched: Scheduler, costs: ReplayCosts, work: PendingWork):
        self.Session, self.exp_id, self.sched, self.costs = Session, exp_id, sched, costs
        self.paths = work.paths  # grows as artifacts are built
        self.rebuilt = set(work.rebuilt)  # artifact keys put back to pending in this run (each at most once)
        self._timed: set[tuple] | None = None  # coordinates with a timed generation stored (read once, then grown)
        self._refs: dict = {}  # prompt key -> its stored reference as replay jobs read it (`references_by_key`)

    # -- bookkeeping
    def _counts(self, s: Session) -> tuple[int, int, int]:
        counts = state_counts(s, self.exp_id)  # one grouped query: this runs after every result
        return sum(counts.values()), counts["done"], counts["failed"]

    def counts(self) -> tuple[int, int, int]:
        """(cells, done, failed) of the experiment."""
        with self.Session() as s:
            return self._counts(s)

    def start(self, orphans: list[CellSpec]) -> tuple[int, int, int]:
        """Fail the cells whose artifact is neither built nor pending; then the counts."""
        with self.Session() as s:
            if orphans:
                store.fail_dependents(
                    s,
                    self.exp_id,
                    [c.id for c in orphans],
                    "an artifact this cell needs is neither built nor pending (it failed)",
                )
                s.commit()
            return self._counts(s)

    def mark_running(self, cells: Iterable[CellSpec], worker: str) -> None:
        with self.Session() as s:
            store.mark_running(s, [c.id for c in cells], worker=worker)
            s.commit()

    def set_device(self, info: dict) -> None:
        """The accelerator worker's device and idle power, once it started."""
        with self.Session() as s:
            store.set_device(s, self.exp_id, info["device"], info.get("idle_power_w"))
            s.commit()

    def reset_running(self) -> None:
        """Ctrl-C: running cells go back to pending."""
        with self.Session() as s:
            store.reset_running(s, self.exp_id)
            s.commit()

    def replay_jobs(self, cells: list[CellSpec], job: Callable[[CellSpec, Reference], ReplayJob]) -> list[ReplayJob]:
        """The replay cells' jobs, built from their prompts' stored references; the cells are marked running."""
        with self.Session() as s:
            missing = {c.params.reference for c in cells} - self._refs.keys()
            if missing:  # each prompt's reference is read once per run (every strategy, k and regime replays it)
                self._refs |= references_by_key(s, self.exp_id, missing)
            jobs = [job(c, self._refs[c.params.reference]) for c in cells]
            store.mark_running(s, [c.id for c in cells], worker="ray-cpu")
            s.commit()
        return jobs

    # -- finished tasks
    def store(self, events: list[Event]) -> None:
        """Write what these finished tasks gave, in one transaction."""
        with self.Session() as s:
            for ev in events:
                if isinstance(ev, Built):
                    self._built(s, ev)
                elif isinstance(ev, BatchDone):
                    self.sched.batch_finished(ev.cells)
                    self._store_outcomes(s, ev)
                elif isinstance(ev, BatchLost):
                    self.sched.batch_finished(ev.cells)
                    self._batch_lost(s, ev)
                else:
                    self.sched.replay_finished()
                    self._replayed(s, ev)
            s.commit()

    def _built(self, s: Session, ev: Built) -> None:
        cell = ev.cell
        if ev.error or ev.info is None:
            self._failed(s, cell, ev.error)
            return
        store.store_artifact(s, cell.id, ev.info)
        store.mark_finished(s, cell.id, ran_on(ev.info))
        self.paths[cell.key] = str(ev.info.path)
        self.sched.artifact_built(cell)

    def _batch_lost(self, s: Session, ev: BatchLost) -> None:
        """The running batch's cells spend an attempt; those of batches queued behind it go back without."""
        for c in reversed(ev.cells):
            if ev.running:
                self._failed(s, c, f"worker died: {ev.error}", front=True)
            else:
                store.refund_attempt(s, c.id)
                self.sched.retry(replace(c, attempts=c.attempts - 1), front=True)

    def _store_outcomes(self, s: Session, ev: BatchDone) -> None:
        """Each cell's result (a label file, a reference, a generation) or its failure, then the batch's power
        samples. Its references are stored first, in one statement, and marked done in one."""
        by_key = {c.key: c for c in ev.cells}
        refs = [(by_key[o.key], o) for o in ev.outcome.outcomes if o.ok and o.reference is not None]
        store.store_references(s, self.exp_id, [(c, o.reference) for c, o in refs])
        store.mark_done(s, [(c.id, o.worker) for c, o in refs])
        for c, _ in refs:
            self.sched.artifact_built(c)  # its replay cells may go
        for o in ev.outcome.outcomes:
            c = by_key[o.key]
            if not o.ok:
                if not self._rebuild_for(s, c, o.error):
                    self._failed(s, c, o.error)
                continue
            if o.reference is not None:
                continue
            if o.label is not None:
                store.store_label(s, c.id, o.label)
                self.paths[c.key] = o.label.path
                self.sched.artifact_built(c)
            elif c.kind == COST_ROLE:
                self.costs.store(s, c, o)
                self.sched.artifact_built(c)
            else:
                self._store_generation(s, c, o)
                continue
            store.mark_finished(s, c.id, o.worker)
        store.store_samples(s, self.exp_id, ev.outcome.samples)

    def store_second_timings(self, due: list[tuple[int, str]], outcome: BatchOutcome) -> None:
        """Second timings (`due[i]`: the generation id and cell key of `outcome.outcomes[i]`) appended to their stored
        generations, and the batch's power samples. A timing that failed is left for a resume; one that made other
        rounds than the stored run is no noise pair (`add_second_timing` stores null), and both are logged."""
        with self.Session() as s:
            for (gen_id, key), o in zip(due, outcome.outcomes):
                if not o.ok or o.generation is None:
                    logger.warning(
                        "second timing of %s... failed: %s",
                        key[:12],
                        next(iter((o.error or "").splitlines()), "no result"),
                    )
                elif differs := store.add_second_timing(s, gen_id, o.generation):
                    logger.warning("second timing of %s... is not a noise pair: %s", key[:12], differs)
            store.store_samples(s, self.exp_id, outcome.samples)
            s.commit()

    def _replayed(self, s: Session, ev: Replayed) -> None:
        """A replay task's cells: the failed ones retried or failed, the others' rows (built by the task) inserted in
        one statement unless a timed twin made other rounds, and marked done in one per worker."""
        if ev.error:
            for c in ev.cells:
                self._failed(s, c, ev.error)
            return
        by_key = {c.key: c for c in ev.cells}
        for o in ev.outcomes:
            c = by_key[o.key]
            if not self._rebuild_for(s, c, o.error):
                self._failed(s, c, o.error)
        rows, done = [], []
        for key, worker, values in ev.rows:
            c = by_key[key]
            if mismatch := self._twin_mismatch(s, c, "replay", lambda v=values: decoded_lists(v, ROUND_LISTS)):
                store.mark_failure(s, c.id, mismatch, final=True)
                continue
            rows.append(values)
            done.append((c.id, worker))
        store.insert_rows(s, rows)
        store.mark_done(s, done)

    def _checked(self, s: Session, c: CellSpec, o: JobOutcome) -> GenerationRecord | None:
        """A timed or replayed generation, unless its twin (the same cell and prompt measured the other way) made
        other rounds: then the cell fails, naming the first round that differs (None)."""
        g = o.generation
        if mismatch := self._twin_mismatch(s, c, g.measure, lambda: g):
            store.mark_failure(s, c.id, mismatch, final=True)
            return None
        return g

    def _twin_mismatch(self, s: Session, c: CellSpec, measure: str, rounds) -> str | None:
        """The first round in which this generation (measured `measure`; `rounds()` gives its rounds, read only when
        a twin is stored) and its twin differ; None where they agree or no twin is stored (a sampled cell has none)."""
        if c.temperature or not self._may_have_twin(s, c, measure):
            return None
        if not (twin := twin_rounds(s, c.id, measure)):
            return None
        return rounds_differ(rounds(), twin) if measure == "timed" else rounds_differ(twin, rounds())

    def _store_generation(self, s: Session, c: CellSpec, o: JobOutcome) -> None:
        """A timed generation (`_checked`), stored with the table's prediction beside it and its cell marked done."""
        if (g := self._checked(s, c, o)) is None:
            return
        store.store_generations(s, self.exp_id, [(c, g, o.worker)], self.costs.predictor())
        if g.measure == "timed" and self._timed is not None:
            self._timed.add(self._coordinate(c))

    @staticmethod
    def _coordinate(c: CellSpec) -> tuple:
        return coordinate_of(c.strategy, c.task, c.k, c.regime, c.temperature, c.params.reference)

    def _may_have_twin(self, s: Session, c: CellSpec, measure: str) -> bool:
        """Whether a twin may be stored: always for a timed generation (few); for a replayed one only where its
        coordinate and prompt has a timed generation (a replayed run times its sample after the replays, so a query
        per replayed cell would nearly always find none)."""
        if measure != "replay":
            return True
        if self._timed is None:
            self._timed = measured_coordinates(s, self.exp_id, "timed")
        return self._coordinate(c) in self._timed

    # -- failures
    def _failed(self, s: Session, c: CellSpec, error: str, front: bool = False) -> None:
        """Store a failed attempt: retry the cell, or, its attempts spent, fail it and, if it builds an artifact
        (on a CPU worker or the accelerator), every cell that needed it, with the error's first line."""
        final = self.sched.is_final(c)
        store.mark_failure(s, c.id, error, final)
        if not final:
            self.sched.retry(c, front=front)
        elif c.kind in BY_CELL_KIND or c.kind in PREREQUISITE_KINDS:
            self._fail_dependents(s, c, error.splitlines()[0] if error else error)

    def _fail_dependents(self, s: Session, cell: CellSpec, error: str) -> None:
        """An artifact cell failed for good: every cell that needed it (directly or not) fails with the reason."""
        dependents = self.sched.artifact_failed(cell)
        what = f"corpus {cell.corpus!r}" if cell.corpus else f"prompt {cell.prompt_index} of task {cell.task!r}"
        if cell.kind == COST_ROLE:
            what = "the verifier"
        store.fail_dependents(
            s, self.exp_id, [c.id for c in dependents], f"{cell.kind} cell for {what} failed: {error}"
        )

    def _rebuild_for(self, s: Session, c: CellSpec, error: str) -> bool:
        """A cell that found its instance base missing or corrupt: the artifact is rebuilt (once per run) and the
        cell waits for it without losing an attempt. False when that does not apply."""
        if not store.is_artifact_error(error) or not c.needs:
            return False
        keys = [key for _, key in c.needs]
        if all(key in self.rebuilt and key in self.sched.built for key in keys):
            return False  # rebuilt already in this run and still failing: a real failure
        for key in keys:
            if key not in self.rebuilt:
                self.rebuilt.add(key)
                if (cell := store.requeue_artifact(s, self.exp_id, key)) is not None:
                    logger.warning("%s: rebuilding artifact %s... (%s)", c.strategy, key[:12], error.splitlines()[0])
                    self.sched.rebuild(cell)
        store.mark_failure(s, c.id, error, final=False, refund=True)
        self.sched.retry(replace(c, attempts=max(0, c.attempts - 1)))
        return True
