"""The Ray driver: spec -> cells -> CPU trainer tasks and one accelerator worker -> the database.

The driver is the database's one writer. Train (and distill) cells run as Ray CPU tasks in parallel; label,
sweep and reference cells go in batches of one strategy to the single `AcceleratorWorker` (prompt by prompt by
default: every strategy of a prompt back to back, a paired measurement; see `orchestrator.scheduler`), two batches
in flight so it never idles (one where a CPU worker takes every core: `batches_in_flight`); results are stored in completion order (`ray.wait`). A failed cell is retried up
to `max_attempts`, then stored as failed with its error while the sweep goes on; a worker that dies mid-batch
is restarted by Ray and its cells retried. A killed driver leaves `running` cells that the next run resets.

One driver per experiment: the driver takes the experiment's lease (a row renewed every few seconds by a
heartbeat thread; see `storage.store.acquire_lease`) before its first write and gives it back at the end; a
second driver refuses with the holder's name, or waits (`wait=True`). A kill -9'd driver of this host is seen to
be dead and its lease taken at once; one elsewhere lets its lease lapse after `lease_s` (`orchestrator.lease`).
SIGTERM stops a run as Ctrl-C does: running cells back to pending, their attempt not counted, the Ray this run
started shut down; Ctrl-C during Ray's start-up lands once it is up (SIGTERM late in ray.init still kills the
driver outright: Ray's core worker holds SIGTERM until init returns). Nothing to run: Ray is not started at all.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from orchestrator.artifact_tasks import ran_on, submit_artifact
from orchestrator.lease import ExperimentLease, LeaseHeld, LeaseLost  # noqa: F401 (LeaseHeld/Lost re-exported)
from orchestrator.prepare import prepare, runner_config
from orchestrator.scheduler import Scheduler
from orchestrator.spec import Spec, load_spec, parse_spec, resolve_paths, spec_hash
from storage import store
from storage.db import guard, open_db, sqlite_path
from storage.models import CELL_KINDS
from storage.queries import state_counts, status_counts
from storage.store import QueuedCell
from workers.contracts import BatchOutcome, LabelJob, SweepJob
from workers.errors import GreenspecError, ModelError

logger = logging.getLogger(__name__)

IN_FLIGHT = 2          # accelerator batches queued at once: the next is ready the moment one finishes
WAIT_S = 1.0           # ray.wait timeout; bounds how late a Ctrl-C or a state change is noticed
FAULT_ENV = "GREENSPEC_FAULT_"  # fault-injection variables (workers/faults.py) reach the worker on any cluster


def worker_threads(asked: int | None, overlap: bool, cpus: int) -> int:
    """The accelerator worker's torch threads: `[verifier] threads` if given, else every core (one fewer with
    `overlap`, for the training beside it). Where other processes share the cores, fewer threads can be far
    faster: torch's threads wait for each other, and a busy core stalls them all (a tiny model's uncached 16-token
    generation took 0.07 s with 2 threads on an idle machine, 3.4 s with 2 beside one busy process, 0.08-0.1 s with
    1 beside it)."""
    return asked or (max(1, cpus - 1) if overlap else cpus)


def batches_in_flight(device: str, threads: int, cpus: int) -> int:
    """Accelerator batches queued at once. Two keep the worker busy while the driver stores the last batch's
    results; but where the worker computes on the CPU with a torch thread on every core, that bookkeeping runs
    beside the next timed generation and slows it: on the demo (2 cores), the strategy timed right after another
    strategy's batch came out 4-10% slower on identical verifier passes, every time. There one batch goes at a
    time (the worker waits while the driver stores; the demo's sweep took 18 s, 9%, longer)."""
    return 1 if device.startswith("cpu") and threads >= cpus else IN_FLIGHT


class Progress(Protocol):
    """What the driver reports as it goes (the CLI draws it as a bar)."""

    def start(self, total: int, done: int, failed: int) -> None: ...
    def update(self, done: int, failed: int, label: str) -> None: ...


class _NoProgress:
    def start(self, total: int, done: int, failed: int) -> None: ...
    def update(self, done: int, failed: int, label: str) -> None: ...


class StaleCells(GreenspecError):
    """Unfinished cells keyed by an earlier version of the spec: they would run with today's settings."""


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
    wait: bool = False                                         # wait for another driver's lease instead of refusing
    lease_s: float | None = None                               # lease expiry (default: GREENSPEC_LEASE_S or 30 s)
    drop_stale: bool = False                                   # drop unfinished cells of an earlier spec version


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
    spec = load_spec(path)  # refuses an unreadable or non-UTF-8 file in one line
    return run(spec, path.read_text(encoding="utf-8"), str(path.resolve()), opts, progress)


def resume(opts: RunOptions, experiment: str | None = None, progress: Progress | None = None,
           retry_failed: bool = False) -> RunReport:
    """Continue an experiment from its stored spec (`greenspec resume`, `greenspec retry --failed`)."""
    path = sqlite_path(opts.db_url)
    if path is not None and path.parent.is_dir() and not path.exists():  # a mistyped --db: say so, create nothing
        raise GreenspecError(f"no database at {path} (--db {opts.db_url}); start one with `greenspec run SPEC`")
    engine, Session = open_db(opts.db_url)
    try:
        with guard(opts.db_url, "reading"), Session() as s:
            exp = store.find_experiment(s, experiment)
            if exp is None:
                raise GreenspecError(f"no experiment {experiment!r} in {opts.db_url}" if experiment
                                     else f"no experiment in {opts.db_url}; start one with `greenspec run SPEC`")
            text, spec_path = exp.spec_toml, exp.spec_path
    finally:
        engine.dispose()
    base = Path(spec_path).parent if spec_path else Path.cwd()
    spec = resolve_paths(parse_spec(text, spec_path or "<stored spec>"), base)
    return run(spec, text, spec_path, opts, progress, retry_failed=retry_failed)


def run(spec: Spec, spec_text: str, spec_path: str | None, opts: RunOptions,
        progress: Progress | None = None, retry_failed: bool = False) -> RunReport:
    """Register the spec's cells (new ones only) and run every pending cell to done or failed."""
    t0 = time.perf_counter()
    spec, _, cells = prepare(spec)  # everything that can refuse bad input happens before the first write
    engine, Session = open_db(opts.db_url)
    try:
        report = _run_leased(spec, cells, (spec_text, spec_path), opts, Session, progress, retry_failed)
    finally:
        engine.dispose()  # no pooled connection outlives the run (SQLite then removes its -wal/-shm files)
    return replace(report, elapsed_s=time.perf_counter() - t0)


def _run_leased(spec: Spec, cells: list, source: tuple[str, str | None], opts: RunOptions, Session: Any,
                progress: Progress | None, retry_failed: bool) -> RunReport:
    """The run proper, under the experiment's lease: register the cells, reset dead ones, run the loop (on Ray
    only when there is something to run)."""
    name = spec.experiment.name
    with guard(opts.db_url), ExperimentLease(Session, name, opts.wait, opts.lease_s) as lease:
        exp_id, added = _register(spec, cells, source, Session, retry_failed, opts.drop_stale)
        if _has_work(Session, exp_id):
            _run_on_ray(spec, exp_id, Session, opts, progress or _NoProgress(), lease)
        else:
            logger.info("experiment %s: no cell to run; Ray not started", name)
        with Session() as s:
            counts = status_counts(s, name)["cells"]
    return RunReport(name, added, counts, 0.0)


def _register(spec: Spec, cells: list, source: tuple[str, str | None], Session: Any, retry_failed: bool,
              drop_stale: bool = False) -> tuple[int, int]:
    """Store the experiment and its new cells, put cells left running (and, retrying, failed ones) back to pending;
    (experiment id, cells added). Unfinished cells of an earlier spec version are refused, or dropped."""
    name, (spec_text, spec_path) = spec.experiment.name, source
    with Session() as s:
        _drop_or_refuse_stale(s, name, {c.key for c in cells}, drop_stale)
        exp = store.upsert_experiment(s, name, spec_text, spec_hash(spec_text), spec_path)
        added = store.add_cells(s, exp.id, cells)
        reset = store.reset_running(s, exp.id)
        failed = store.retry_failed(s, exp.id) if retry_failed else 0
        s.commit()
    if reset or failed:
        logger.info("%d cells left running by an earlier driver and %d failed ones set back to pending", reset, failed)
    logger.info("experiment %s: %d new cells", name, added)
    return exp.id, added


def _drop_or_refuse_stale(s: Any, name: str, keys: set[str], drop: bool) -> None:
    """A cell runs as it was keyed or not at all: unfinished cells the spec no longer makes (another max_new_tokens,
    a removed strategy or prompt) are refused in one line, before anything is written, or dropped with `drop`."""
    exp = store.find_experiment(s, name)
    stale = store.stale_cells(s, exp.id, keys) if exp is not None else []
    if stale and not drop:
        raise StaleCells(f"experiment {name!r}: {len(stale)} unfinished cells were keyed by an earlier version of its "
                         "spec (or of greenspec) and would run with this one's settings; pass --drop-stale to drop "
                         "them, or run the earlier spec")
    if stale:
        logger.warning("experiment %s: dropped %d unfinished cells of an earlier version of its spec", name,
                       store.drop_cells(s, stale))


def _has_work(Session: Any, exp_id: int) -> bool:
    """Whether a pending cell, or a built artifact whose file is gone (rebuilt by the loop), awaits."""
    with Session() as s:
        return state_counts(s, exp_id)["pending"] > 0 or bool(store.missing_artifacts(s, exp_id))


def _run_on_ray(spec: Spec, exp_id: int, Session: Any, opts: RunOptions, progress: Progress,
                lease: ExperimentLease) -> None:
    """Start (or join) Ray and run the loop. Ctrl-C at any moment, Ray's start-up included, or SIGTERM once Ray is up,
    ends in `Interrupted` with no cell left running and the Ray this run started shut down."""
    started_ray = not _ray_initialized()  # then this run starts (or joins) Ray, and shuts it down (or leaves)
    try:
        with _sigterm_as_interrupt():
            with _interrupts_deferred():  # a signal during ray.init lands once it returns (our handlers restored)
                _ray_up(opts)
            _Loop(spec, exp_id, Session, opts, progress, lease).run()
    except (KeyboardInterrupt, SystemExit) as err:  # SystemExit: Ray's SIGTERM handler, if it struck inside init
        with Session() as s:
            store.reset_running(s, exp_id)
            s.commit()
        raise Interrupted("interrupted: running cells were put back; `greenspec resume` continues") from err
    finally:
        if started_ray:
            import ray

            ray.shutdown()


def _ray_initialized() -> bool:
    import ray

    return ray.is_initialized()


@contextmanager
def _interrupts_deferred():
    """Hold SIGINT and SIGTERM while the block runs and raise KeyboardInterrupt after it if one came (main thread
    only): Ray's start-up, interrupted half-way, leaves processes that no shutdown finds."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: came.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if came:
        raise KeyboardInterrupt


# ----------------------------------------------------------------------------- one driver per experiment

@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (kill, a scheduler's stop) stops the run as Ctrl-C does; only in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _ray_up(opts: RunOptions) -> bool:
    """Connect to `opts.address` or start a local Ray with the one `accelerator` resource; True if started here."""
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Ray's workers at the driver's own priority (Ray's default: 15 nicer); `nice` greenspec to yield
    os.environ.setdefault("RAY_worker_niceness", "0")
    if opts.address:
        ray.init(address=opts.address, log_to_driver=False, configure_logging=False)
    else:
        # "local": a new Ray here, never a `ray start` cluster that a bare ray.init() would join
        ray.init(address="local", num_cpus=opts.num_cpus or os.cpu_count(), resources={"accelerator": 1},
                 include_dashboard=False, log_to_driver=False, configure_logging=False)
    return True


class _Loop:
    """One pass over an experiment's pending cells: Ray calls and database writes around the `Scheduler`."""

    def __init__(self, spec: Spec, exp_id: int, Session: Any, opts: RunOptions, progress: Progress,
                 lease: ExperimentLease | None = None):
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
            self.paths = store.artifact_paths(s, exp_id)   # artifact cell key -> file
        e = spec.experiment
        self.sched = Scheduler(cells, e.batch_size, e.max_attempts, overlap=e.overlap, in_flight=IN_FLIGHT,
                               built=self.paths, order=spec.sweep.order)
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
                if self.lease is not None:
                    self.lease.check()
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
        return submit_artifact(self.spec, c, self.paths)

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
        store.mark_finished(s, cell.id, ran_on(info))
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
        threads = worker_threads(self.spec.verifier.threads, self.spec.experiment.overlap, cpus)
        env = {**{k: v for k, v in os.environ.items() if k.startswith(FAULT_ENV)}, **self.opts.worker_env}
        options = {"runtime_env": {"env_vars": env}} if env else {}
        self.actor = cls.options(**options).remote(runner_config(self.spec, threads))
        try:
            info = ray.get(self.actor.info.remote())  # waits for the verifier to load; fails fast on a bad model
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as err:
            self.actor = None
            cause = getattr(err, "cause", None) or err
            first = next((ln for ln in str(cause).splitlines() if ln.strip()), type(cause).__name__)
            raise ModelError(f"verifier.model: {self.spec.verifier.model} could not be loaded by the accelerator "
                             f"worker ({first.strip()[:200]})") from err
        self.sched.in_flight = batches_in_flight(str(info["device"]), threads, cpus)
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
            if not o.ok and self._rebuild_for(c, o.error, s):
                continue
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

    def _rebuild_for(self, c: QueuedCell, error: str, s) -> bool:
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
