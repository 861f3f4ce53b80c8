"""The Ray driver: spec -> cells -> CPU trainer tasks and one accelerator worker -> the database.

The driver is the database's one writer. Train (and distill) cells run as Ray CPU tasks in parallel; label,
sweep and reference cells go in batches (grouped by strategy) to the single `AcceleratorWorker`, two batches in
flight so it never idles; results are stored in completion order (`ray.wait`). A failed cell is retried up
to `max_attempts`, then stored as failed with its error while the sweep goes on; a worker that dies mid-batch
is restarted by Ray and its cells retried. A killed driver leaves `running` cells that the next run resets.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from orchestrator.prepare import prepare, runner_config
from orchestrator.scheduler import Scheduler
from orchestrator.spec import Spec, load_spec, parse_spec, resolve_paths, spec_hash
from storage import store
from storage.db import open_db
from storage.queries import state_counts, status_counts
from storage.models import CELL_KINDS
from storage.store import QueuedCell
from workers.contracts import ArtifactJob, BatchOutcome, LabelJob, SweepJob
from workers.errors import GreenspecError

logger = logging.getLogger(__name__)

IN_FLIGHT = 2          # accelerator batches queued at once: the next is ready the moment one finishes
WAIT_S = 1.0           # ray.wait timeout; bounds how late a Ctrl-C or a state change is noticed


class Progress(Protocol):
    """What the driver reports as it goes (the CLI draws it as a bar)."""

    def start(self, total: int, done: int, failed: int) -> None: ...
    def update(self, done: int, failed: int, label: str) -> None: ...


class _NoProgress:
    def start(self, total: int, done: int, failed: int) -> None: ...
    def update(self, done: int, failed: int, label: str) -> None: ...


class Interrupted(GreenspecError):
    """Ctrl-C: running cells were put back to pending."""


@dataclass(frozen=True)
class RunOptions:
    """How to run: where to store, which Ray, and test/benchmark seams."""

    db_url: str = "sqlite:///greenspec.db"
    address: str | None = None
    num_cpus: int | None = None
    worker_env: dict[str, str] = field(default_factory=dict)   # env vars of the accelerator worker (fault tests)
    worker_cls: Any = None                                     # a Ray actor class replacing AcceleratorWorker


@dataclass(frozen=True)
class RunReport:
    """What a run did: cells added this time and the final counts by state."""

    experiment: str
    added: int
    counts: dict[str, int]
    elapsed_s: float


# ----------------------------------------------------------------------------- the run

def run_spec_file(path: str | Path, opts: RunOptions, progress: Progress | None = None) -> RunReport:
    """Load a spec file and run it (`greenspec run SPEC`)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    spec = load_spec(path)
    return run(spec, text, str(path.resolve()), opts, progress)


def resume(opts: RunOptions, experiment: str | None = None, progress: Progress | None = None,
           retry_failed: bool = False) -> RunReport:
    """Continue an experiment from its stored spec (`greenspec resume`, `greenspec retry --failed`)."""
    _, Session = open_db(opts.db_url)
    with Session() as s:
        exp = store.find_experiment(s, experiment)
        if exp is None:
            raise GreenspecError(f"no experiment {experiment!r} in {opts.db_url}" if experiment
                                 else f"no experiment in {opts.db_url}; start one with `greenspec run SPEC`")
        if retry_failed:
            n = store.retry_failed(s, exp.id)
            s.commit()
            logger.info("%d failed cells set back to pending", n)
        text, spec_path = exp.spec_toml, exp.spec_path
    base = Path(spec_path).parent if spec_path else Path.cwd()
    spec = resolve_paths(parse_spec(text, spec_path or "<stored spec>"), base)
    return run(spec, text, spec_path, opts, progress)


def run(spec: Spec, spec_text: str, spec_path: str | None, opts: RunOptions,
        progress: Progress | None = None) -> RunReport:
    """Register the spec's cells (new ones only) and run every pending cell to done or failed."""
    t0 = time.perf_counter()
    spec, _, cells = prepare(spec)  # everything that can refuse bad input happens before the first write
    _, Session = open_db(opts.db_url)
    with Session() as s:
        exp = store.upsert_experiment(s, spec.experiment.name, spec_text, spec_hash(spec_text), spec_path)
        added = store.add_cells(s, exp.id, cells)
        reset = store.reset_running(s, exp.id)
        s.commit()
        exp_id = exp.id
    if reset:
        logger.info("%d cells left running by an earlier driver were reset to pending", reset)
    logger.info("experiment %s: %d new cells", spec.experiment.name, added)
    started_ray = _ray_up(opts)
    try:
        _Loop(spec, exp_id, Session, opts, progress or _NoProgress()).run()
    finally:
        if started_ray:
            import ray

            ray.shutdown()
    with Session() as s:
        counts = status_counts(s, spec.experiment.name)["cells"]
    return RunReport(spec.experiment.name, added, counts, time.perf_counter() - t0)


def _ray_up(opts: RunOptions) -> bool:
    """Connect to `opts.address` or start a local Ray with the one `accelerator` resource; True if started here."""
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if opts.address:
        ray.init(address=opts.address, log_to_driver=False, configure_logging=False)
    else:
        # "local": a new Ray here, never a `ray start` cluster that a bare ray.init() would join
        ray.init(address="local", num_cpus=opts.num_cpus or os.cpu_count(), resources={"accelerator": 1},
                 include_dashboard=False, log_to_driver=False, configure_logging=False)
    return True


class _Loop:
    """One pass over an experiment's pending cells: Ray calls and database writes around the `Scheduler`."""

    def __init__(self, spec: Spec, exp_id: int, Session: Any, opts: RunOptions, progress: Progress):
        self.spec, self.exp_id, self.Session, self.opts, self.progress = spec, exp_id, Session, opts, progress
        with Session() as s:
            cells = store.pending_cells(s, exp_id, CELL_KINDS)  # artifacts of every kind, references, sweeps
            self.paths = store.artifact_paths(s, exp_id)   # artifact cell key -> file
        e = spec.experiment
        self.sched = Scheduler(cells, e.batch_size, e.max_attempts, overlap=e.overlap, in_flight=IN_FLIGHT,
                               built=self.paths)
        self.builds: dict[Any, QueuedCell] = {}                        # ObjectRef -> artifact cell
        self.batches: dict[Any, tuple[list[QueuedCell], Any]] = {}     # ObjectRef -> (cells, the actor running them)
        self.actor = None
        self.label = ""
        self._seq: dict[Any, int] = {}               # ObjectRef -> submission order (the actor runs in this order)
        self._counter = itertools.count()
        self._died_at: dict[int, int] = {}           # id(dead actor) -> submission number of the batch it died in

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
                store.fail_dependents(s, self.exp_id, [c.id for c in self.sched.orphans],
                                      "an artifact this cell needs is neither built nor pending (it failed)")
                s.commit()
            total, done, failed = self._counts(s)
        self.progress.start(total, done, failed)
        try:
            while self.sched.busy() or self.builds or self.batches:
                self._submit_artifacts()
                self._dispatch()
                self._collect()
        except KeyboardInterrupt:
            self._stop()
            raise Interrupted("interrupted: running cells were put back; `greenspec resume` continues") from None
        finally:
            self._close_actor()

    def _stop(self) -> None:
        """Ctrl-C: stop training tasks and the worker at once; their cells go back to pending."""
        import ray

        for ref in self.builds:
            ray.cancel(ref, force=True)
        if self.actor is not None:
            ray.kill(self.actor, no_restart=True)  # its batch in flight is lost, its cells are re-run on resume
            self.actor = None
        with self.Session() as s:
            store.reset_running(s, self.exp_id)
            s.commit()

    # -- artifacts (instance bases) on CPU workers
    def _submit_artifacts(self) -> None:
        cells = self.sched.start_artifacts()
        if not cells:
            return
        with self.Session() as s:
            store.mark_running(s, [c.id for c in cells], worker="ray-cpu")
            s.commit()
        for c in cells:
            self.builds[self._artifact_call(c)] = c

    def _artifact_call(self, c: QueuedCell):
        """Submit the CPU task that builds this artifact cell: an instance base, or another artifact by kind."""
        from workers.trainer import build_task, train_task

        corpus = self.spec.corpus(c.corpus)
        if c.kind != "train":
            return build_task.remote(ArtifactJob(
                kind=c.kind, corpus=corpus.source(), tokenizer=c.params["tokenizer"],
                out_dir=self.spec.experiment.artifacts, options=corpus.model_dump(exclude={"name"}),
                inputs={role: self.paths[key] for role, key in c.needs},
                power_sources=tuple(self.spec.power.sources), power_hz=self.spec.power.hz))
        return train_task.remote(corpus.source(), c.params["tokenizer"], self.spec.experiment.artifacts,
                                 window=corpus.window, backend=corpus.backend, order=corpus.order,
                                 max_tokens=corpus.max_tokens, shards=corpus.shards, memory_gb=corpus.memory_gb,
                                 power_sources=tuple(self.spec.power.sources), power_hz=self.spec.power.hz)

    def _build_done(self, ref, s) -> None:
        import ray

        cell = self.builds.pop(ref)
        try:
            info = ray.get(ref)
        except (ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError) as err:
            cause = getattr(err, "cause", None) or err
            error = f"{type(cause).__name__}: {cause}"
            final = self.sched.is_final(cell)
            store.mark_failure(s, cell.id, error, final)
            if not final:
                self.sched.retry(cell)
                return
            self._fail_dependents(s, cell, error)
            return
        store.store_artifact(s, cell.id, info)
        store.mark_finished(s, cell.id, "ray-cpu")
        self.paths[cell.key] = str(info.path)
        self.sched.artifact_built(cell)

    def _fail_dependents(self, s, cell: QueuedCell, error: str) -> None:
        """An artifact cell failed for good: every cell that needed it (directly or not) fails with the reason."""
        dependents = self.sched.artifact_failed(cell)
        store.fail_dependents(s, self.exp_id, [c.id for c in dependents],
                              f"{cell.kind} cell for corpus {cell.corpus!r} failed: {error}")

    # -- the accelerator
    def _ensure_actor(self) -> None:
        if self.actor is not None:
            return
        import ray

        from workers.accelerator import AcceleratorWorker

        cls = self.opts.worker_cls or AcceleratorWorker
        cpus = os.cpu_count() or 1
        threads = max(1, cpus - 1) if self.spec.experiment.overlap else cpus
        options = {"runtime_env": {"env_vars": self.opts.worker_env}} if self.opts.worker_env else {}
        self.actor = cls.options(**options).remote(runner_config(self.spec, threads))
        info = ray.get(self.actor.info.remote())  # waits for the verifier to load; fails fast on a bad model
        with self.Session() as s:
            store.set_device(s, self.exp_id, info["device"], info.get("idle_power_w"))
            s.commit()

    def _job(self, c: QueuedCell) -> SweepJob | LabelJob:
        """What the worker gets for a cell: its prompt, draft options and the paths of the artifacts it needs."""
        p = c.params
        if c.kind == "label":
            corpus = self.spec.corpus(c.corpus)
            return LabelJob(key=c.key, corpus=corpus.source(), out_dir=self.spec.experiment.artifacts,
                            max_tokens=corpus.label_budget(), chunk_tokens=corpus.label_chunk_tokens,
                            overlap_tokens=corpus.label_overlap_tokens)
        return SweepJob(key=c.key, kind=c.kind, prompt=p["prompt"], strategy=c.strategy, draft=c.draft,
                        options=p.get("options", {}), artifacts={role: self.paths[key] for role, key in c.needs},
                        k=c.k or 0, regime=c.regime, temperature=c.temperature or 0.0, top_k=p.get("top_k", 0),
                        top_p=p.get("top_p", 1.0), seed=p.get("seed"))

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
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.WorkerCrashedError) as err:
            logger.warning("accelerator worker died during a batch of %d cells; retrying them", len(cells))
            if actor is self.actor:  # a fresh worker (verifier reloaded) takes the retried cells
                ray.kill(actor, no_restart=True)
                self.actor = None
            # the actor runs batches in order: only the oldest unfinished one was running when it died; batches
            # queued behind it never started, so their cells go back without spending an attempt
            died_at = self._died_at.setdefault(id(actor), min(
                [self._seq[ref], *(self._seq[r] for r, (_, a) in self.batches.items() if a is actor)]))
            running = self._seq.pop(ref) == died_at
            for c in reversed(cells):
                if not running:
                    store.refund_attempt(s, c.id)
                    self.sched.retry(replace(c, attempts=c.attempts - 1), front=True)
                    continue
                final = self.sched.is_final(c)
                store.mark_failure(s, c.id, f"worker died: {type(err).__name__}", final)
                if not final:
                    self.sched.retry(c, front=True)
                elif self.sched.builds_on_accelerator(c):
                    self._fail_dependents(s, c, f"worker died: {type(err).__name__}")
            return
        self._seq.pop(ref)
        by_key = {c.key: c for c in cells}
        for o in out.outcomes:
            c = by_key[o.key]
            if not o.ok:
                final = self.sched.is_final(c)
                store.mark_failure(s, c.id, o.error, final)
                if not final:
                    self.sched.retry(c)
                elif self.sched.builds_on_accelerator(c):
                    self._fail_dependents(s, c, o.error.splitlines()[0])
                continue
            if o.label is not None:
                store.store_label(s, c.id, o.label)
                self.paths[c.key] = o.label.path
                self.sched.artifact_built(c)
            elif o.reference is not None:
                store.store_reference(s, c.id, o.reference)
            else:
                store.store_generation(s, c.id, o.generation)
            store.mark_finished(s, c.id, o.worker)
        store.store_samples(s, self.exp_id, out.samples)

    def _collect(self) -> None:
        import ray

        pending = list(self.builds) + list(self.batches)
        if not pending:
            return
        ready, _ = ray.wait(pending, num_returns=1, timeout=WAIT_S)
        if not ready:
            return
        with self.Session() as s:
            for ref in ready:
                (self._build_done if ref in self.builds else self._batch_done)(ref, s)
            s.commit()
        self._report()

    def _close_actor(self) -> None:
        if self.actor is None:
            return
        import ray

        try:
            ray.get(self.actor.close.remote(), timeout=30)
        except Exception:  # the actor may already be gone; the run's results are stored either way
            logger.debug("accelerator worker close failed", exc_info=True)
        ray.kill(self.actor)
        self.actor = None
