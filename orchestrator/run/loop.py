"""One pass over an experiment's pending cells: Ray calls and database writes around the `Scheduler`.

Artifact cells (instance bases, datastores, distilled bases) run as Ray CPU tasks in parallel; label, reference
and sweep cells go in batches of one strategy to the single accelerator worker, `in_flight` batches queued so it
never idles; results are stored in completion order (`ray.wait`). A failed cell is retried up to `max_attempts`,
then stored as failed with its error while the sweep goes on, and so are the cells that needed it; a worker that
dies mid-batch is replaced and its cells retried. A cell that finds its artifact missing or corrupt has the
artifact rebuilt (once per run) without losing an attempt.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import replace
from typing import Any

from orchestrator.run.accelerator_actor import IN_FLIGHT, close_actor, start_actor
from orchestrator.run.artifact_tasks import ran_on, submit_artifact
from orchestrator.run.cells import COST_ROLE
from orchestrator.run.lease import ExperimentLease
from orchestrator.run.options import Interrupted, Progress, RunOptions
from orchestrator.run.ray_startup import check_interrupt, interrupt_handled
from orchestrator.run.replay_costs import PREREQUISITE_KINDS, ReplayCosts
from orchestrator.run.scheduler import Scheduler
from orchestrator.run.spec import Spec
from storage import store
from storage.cell import CellSpec
from storage.models import CELL_KINDS
from storage.queries import state_counts
from storage.replays import done_keys, references_by_key, twin_rounds
from workers.artifacts import BY_CELL_KIND
from workers.contracts import BatchOutcome, LabelJob, ReplayJob, SweepJob
from workers.replay import rounds_differ

logger = logging.getLogger(__name__)

WAIT_S = 1.0  # ray.wait timeout; bounds how late a Ctrl-C or a state change is noticed


class SweepLoop:
    """Runs an experiment's pending cells to done or failed, writing each result as it arrives."""

    def __init__(
        self,
        spec: Spec,
        exp_id: int,
        Session: Any,
        opts: RunOptions,
        progress: Progress,
        lease: ExperimentLease | None = None,
    ):
        self.spec, self.exp_id, self.Session, self.opts, self.progress = spec, exp_id, Session, opts, progress
        self.lease = lease
        self.rebuilt: set[str] = set()  # artifact keys put back to pending in this run (each at most once)
        with Session() as s:
            for key in store.missing_artifacts(s, exp_id):  # a deleted instance base is rebuilt, not failed on
                logger.warning("artifact %s... is missing on disk; rebuilding it", key[:12])
                store.requeue_artifact(s, exp_id, key)
                self.rebuilt.add(key)
            s.commit()
            cells = store.pending_cells(s, exp_id, CELL_KINDS)  # artifacts of every kind, references, sweeps
            self.paths = store.artifact_paths(s, exp_id)  # artifact cell key -> file
            prerequisites = done_keys(s, exp_id, PREREQUISITE_KINDS)  # done cells that replays and auto-k need
        e = spec.experiment
        self.sched = Scheduler(
            cells,
            e.batch_size,
            e.max_attempts,
            overlap=e.overlap,
            in_flight=IN_FLIGHT,
            built=set(self.paths) | prerequisites,
            order=spec.sweep.order,
        )
        self.replaying: dict[Any, list[CellSpec]] = {}  # ObjectRef -> the replay cells it runs
        self.costs = ReplayCosts(Session, exp_id)
        self.builds: dict[Any, CellSpec] = {}  # ObjectRef -> artifact cell
        self.batches: dict[Any, tuple[list[CellSpec], Any]] = {}  # ObjectRef -> (cells, the actor running them)
        self.actor = None
        self.label = ""
        self._seq: dict[Any, int] = {}  # ObjectRef -> submission order (the actor runs in this order)
        self._counter = itertools.count()
        self._died_at: dict[int, int] = {}  # id(dead actor) -> submission number of the batch it died in

    # -- bookkeeping
    def _counts(self, s) -> tuple[int, int, int]:
        counts = state_counts(s, self.exp_id)  # one grouped query: this runs after every result
        return sum(counts.values()), counts["done"], counts["failed"]

    def _report(self) -> None:
        with self.Session() as s:
            _, done, failed = self._counts(s)
        self.progress.update(done, failed, self.label)

    def run(self) -> None:
        with self.Session() as s:
            if self.sched.orphans:
                store.fail_dependents(
                    s,
                    self.exp_id,
                    [c.id for c in self.sched.orphans],
                    "an artifact this cell needs is neither built nor pending (it failed)",
                )
                s.commit()
            total, done, failed = self._counts(s)
        self.progress.start(total, done, failed)
        try:
            while self.sched.busy() or self.builds or self.batches or self.replaying:
                check_interrupt()  # one swallowed on the way (in a gc callback) stops the run here
                if self.lease is not None:
                    self.lease.check()
                self._submit_artifacts()
                self._dispatch()
                self._dispatch_replays()
                self._collect()
        except KeyboardInterrupt:
            interrupt_handled()
            self._stop()
            raise Interrupted("interrupted: running cells were put back; `greenspec resume` continues") from None
        finally:
            if self.actor is not None:
                close_actor(self.actor)
                self.actor = None

    def _stop(self) -> None:
        """Ctrl-C: stop training tasks and the worker at once; their cells go back to pending."""
        import ray

        for ref in [*self.builds, *self.replaying]:
            ray.cancel(ref, force=True)
        if self.actor is not None:
            ray.kill(self.actor, no_restart=True)  # its batch in flight is lost, its cells are re-run on resume
            self.actor = None
        with self.Session() as s:
            store.reset_running(s, self.exp_id)
            s.commit()

    def _collect(self) -> None:
        import ray

        pending = list(self.builds) + list(self.batches) + list(self.replaying)
        if not pending:
            return
        ready, _ = ray.wait(pending, num_returns=1, timeout=WAIT_S)
        if not ready:
            return
        with self.Session() as s:
            for ref in ready:
                done = self._build_done if ref in self.builds else self._replay_done if ref in self.replaying else None
                (done or self._batch_done)(ref, s)
            s.commit()
        self._report()

    # -- artifacts on CPU workers
    def _submit_artifacts(self) -> None:
        cells = self.sched.start_artifacts()
        if not cells:
            return
        with self.Session() as s:
            store.mark_running(s, [c.id for c in cells], worker="ray-cpu")
            s.commit()
        for c in cells:
            self.builds[self._artifact_call(c)] = c

    def _artifact_call(self, c: CellSpec):
        """Submit the CPU task that builds this artifact cell: an instance base, or another artifact by kind."""
        return submit_artifact(self.spec, c, self.paths)

    def _build_done(self, ref, s) -> None:
        import ray

        cell = self.builds.pop(ref)
        try:
            info = ray.get(ref)
        except (ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError) as err:
            cause = getattr(err, "cause", None) or err
            self._failed(s, cell, f"{type(cause).__name__}: {cause}")
            return
        store.store_artifact(s, cell.id, info)
        store.mark_finished(s, cell.id, ran_on(info))
        self.paths[cell.key] = str(info.path)
        self.sched.artifact_built(cell)

    def _failed(self, s, c: CellSpec, error: str, front: bool = False) -> None:
        """Store a failed attempt: retry the cell, or, its attempts spent, fail it and, if it builds an artifact
        (on a CPU worker or the accelerator), every cell that needed it, with the error's first line."""
        final = self.sched.is_final(c)
        store.mark_failure(s, c.id, error, final)
        if not final:
            self.sched.retry(c, front=front)
        elif c.kind in BY_CELL_KIND or c.kind in PREREQUISITE_KINDS:
            self._fail_dependents(s, c, error.splitlines()[0] if error else error)

    def _fail_dependents(self, s, cell: CellSpec, error: str) -> None:
        """An artifact cell failed for good: every cell that needed it (directly or not) fails with the reason."""
        dependents = self.sched.artifact_failed(cell)
        what = f"corpus {cell.corpus!r}" if cell.corpus else f"prompt {cell.prompt_index} of task {cell.task!r}"
        if cell.kind == COST_ROLE:
            what = "the verifier"
        store.fail_dependents(
            s, self.exp_id, [c.id for c in dependents], f"{cell.kind} cell for {what} failed: {error}"
        )

    # -- the accelerator
    def _ensure_actor(self) -> None:
        if self.actor is not None:
            return
        self.actor, info, self.sched.in_flight = start_actor(self.spec, self.opts)
        with self.Session() as s:
            store.set_device(s, self.exp_id, info["device"], info.get("idle_power_w"))
            s.commit()

    def _job(self, c: CellSpec) -> SweepJob | LabelJob:
        """What the worker gets for a cell: its prompt, draft options and the paths of the artifacts it needs."""
        p = c.params
        if c.kind == "label":
            corpus = self.spec.corpus(c.corpus)
            return LabelJob(
                key=c.key,
                corpus=corpus.source(),
                out_dir=self.spec.experiment.artifacts,
                max_tokens=corpus.label_budget(),
                chunk_tokens=corpus.label_chunk_tokens,
                overlap_tokens=corpus.label_overlap_tokens,
            )
        if c.kind == COST_ROLE:
            return self.costs.job(c, self.spec)
        return SweepJob(
            key=c.key,
            kind=c.kind,
            prompt=p.prompt,
            strategy=c.strategy,
            draft=c.draft,
            options=p.options,
            artifacts=self._artifacts(c),
            costs=self.costs.model_json() if COST_ROLE in dict(c.needs) else None,
            k=c.k or 0,
            regime=c.regime,
            temperature=c.temperature or 0.0,
            top_k=p.top_k,
            top_p=p.top_p,
            seed=p.seed,
        )

    def _dispatch(self) -> None:
        while batch := self.sched.next_batch():
            self._ensure_actor()
            with self.Session() as s:
                store.mark_running(s, [c.id for c in batch], worker="accelerator")
                s.commit()
            ref = self.actor.run_batch.remote([self._job(c) for c in batch])
            self.batches[ref] = (batch, self.actor)
            self._seq[ref] = next(self._counter)
            self.label = batch[0].strategy or batch[0].kind

    def _batch_done(self, ref, s) -> None:
        import ray

        cells, actor = self.batches.pop(ref)
        self.sched.batch_finished()
        try:
            out: BatchOutcome = ray.get(ref)
        except (
            ray.exceptions.RayActorError,
            ray.exceptions.ActorUnavailableError,
            ray.exceptions.WorkerCrashedError,
        ) as err:
            self._worker_died(s, ref, cells, actor, err)
            return
        self._seq.pop(ref)
        self._store_outcomes(s, cells, out)

    def _worker_died(self, s, ref, cells: list[CellSpec], actor: Any, err: Exception) -> None:
        """The worker died during a batch: a fresh worker (verifier reloaded) takes the batch's cells. The actor runs
        batches in order, so only the oldest unfinished one was running when it died: its cells spend an attempt,
        those of batches queued behind it go back without."""
        import ray

        logger.warning("accelerator worker died during a batch of %d cells; retrying them", len(cells))
        if actor is self.actor:
            ray.kill(actor, no_restart=True)
            self.actor = None
        died_at = self._died_at.setdefault(
            id(actor), min([self._seq[ref], *(self._seq[r] for r, (_, a) in self.batches.items() if a is actor)])
        )
        running = self._seq.pop(ref) == died_at
        for c in reversed(cells):
            if running:
                self._failed(s, c, f"worker died: {type(err).__name__}", front=True)
            else:
                store.refund_attempt(s, c.id)
                self.sched.retry(replace(c, attempts=c.attempts - 1), front=True)

    def _store_outcomes(self, s, cells: list[CellSpec], out: BatchOutcome) -> None:
        """Each cell's result (a label file, a reference, a generation) or its failure, then the batch's power
        samples."""
        by_key = {c.key: c for c in cells}
        for o in out.outcomes:
            c = by_key[o.key]
            if not o.ok:
                if not self._rebuild_for(c, o.error, s):
                    self._failed(s, c, o.error)
                continue
            if o.label is not None:
                store.store_label(s, c.id, o.label)
                self.paths[c.key] = o.label.path
                self.sched.artifact_built(c)
            elif o.reference is not None:
                store.store_reference(s, c.id, o.reference)
                self.sched.artifact_built(c)  # its replay cells may go
            elif c.kind == COST_ROLE:
                self.costs.store(s, c, o)
                self.sched.artifact_built(c)
            else:
                self._store_generation(s, c, o)
                continue
            store.mark_finished(s, c.id, o.worker)
        store.store_samples(s, self.exp_id, out.samples)

    def _rebuild_for(self, c: CellSpec, error: str, s) -> bool:
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

    # -- replays on CPU workers
    def _artifacts(self, c: CellSpec) -> dict[str, str]:
        """role -> file of the artifacts a cell's draft reads (its reference and the cost model are not files)."""
        return {role: self.paths[key] for role, key in c.needs if role not in ("reference", COST_ROLE)}

    def _dispatch_replays(self) -> None:
        import ray

        from workers.trainer import replay_task

        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        while batch := self.sched.next_replay_batch(cpus):
            with self.Session() as s:
                refs = references_by_key(s, self.exp_id, [c.params.reference for c in batch])
                jobs = [self._replay_job(c, refs[c.params.reference]) for c in batch]
                store.mark_running(s, [c.id for c in batch], worker="ray-cpu")
                s.commit()
            tokenizer = self.spec.verifier.tokenizer or self.spec.verifier.model
            self.replaying[replay_task.remote(jobs, tokenizer)] = batch
            self.label = f"{batch[0].strategy} (replay)"

    def _replay_job(self, c: CellSpec, ref) -> ReplayJob:
        return ReplayJob(
            key=c.key,
            strategy=c.strategy,
            draft=c.draft,
            options=c.params.options,
            artifacts=self._artifacts(c),
            k=c.k or 0,
            regime=c.regime,
            prompt_tokens=tuple(ref.prompt_tokens),
            reference=tuple(ref.tokens),
            text=ref.text,
            vocab_size=ref.vocab_size,
            eos_id=ref.eos_id,
            max_new_tokens=self.spec.sweep.max_new_tokens,
            costs=self.costs.model_json() if c.params.options.get("auto") else None,
        )

    def _replay_done(self, ref, s) -> None:
        import ray

        cells = self.replaying.pop(ref)
        self.sched.replay_finished()
        try:
            outcomes = ray.get(ref)
        except (ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError) as err:
            cause = getattr(err, "cause", None) or err
            for c in cells:
                self._failed(s, c, f"{type(cause).__name__}: {cause}")
            return
        by_key = {c.key: c for c in cells}
        for o in outcomes:
            c = by_key[o.key]
            if not o.ok:
                if not self._rebuild_for(c, o.error, s):
                    self._failed(s, c, o.error)
                continue
            self._store_generation(s, c, o)

    def _store_generation(self, s, c: CellSpec, o) -> None:
        """A timed or replayed generation with the cost model's prediction, unless its twin (the same cell and prompt
        measured the other way) made other rounds: then the cell fails, naming the first round that differs."""
        g = self.costs.predict(s, o.generation)
        twin = None if c.temperature else twin_rounds(s, c.id, g.measure)
        mismatch = twin and (rounds_differ(g, twin) if g.measure == "timed" else rounds_differ(twin, g))
        if mismatch:
            store.mark_failure(s, c.id, mismatch, final=True)
            return
        store.store_generation(s, c.id, g)
        store.mark_finished(s, c.id, o.worker)
