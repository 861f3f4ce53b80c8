"""The Ray driver: spec -> cells -> CPU trainer tasks and one accelerator worker -> the database.

The driver is the database's one writer. Train cells run as Ray CPU tasks in parallel; sweep and
reference cells go in batches (grouped by strategy) to the single `AcceleratorWorker`, two batches in
flight so it never idles; results are stored in completion order (`ray.wait`). A failed cell is retried up
to `max_attempts`, then stored as failed with its error while the sweep goes on; a worker that dies mid-batch
is restarted by Ray and its cells retried. A killed driver leaves `running` cells that the next run resets.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from orchestrator import store
from orchestrator.cells import CellSpec, TaskPrompts, expand
from orchestrator.spec import Spec, check_paths, load_spec, parse_spec, resolve_paths, spec_hash
from storage.db import open_db
from storage.models import Cell, Experiment
from storage.queries import state_counts, status_counts
from workers.errors import GreenspecError, ModelError
from workers.runner import RunnerConfig

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


# ----------------------------------------------------------------------------- preparation (no writes)

def load_prompts(spec: Spec) -> list[TaskPrompts]:
    """Every task's prompts, read before anything is stored so a missing source changes nothing."""
    from workers.tasks import load_prompts as load

    out = []
    for t in spec.tasks:
        ps = load(t.source(), t.prompts, t.prompt_words)
        out.append(TaskPrompts(task=t.name, texts=tuple(p.text for p in ps.prompts), skipped_short=ps.skipped_short))
        if len(ps.prompts) < t.prompts:
            logger.warning("task %s: only %d usable prompts of %d asked", t.name, len(ps.prompts), t.prompts)
    return out


def preflight_models(spec: Spec) -> None:
    """Refuse a local model path that holds no loadable model config (one line, before any write)."""
    from transformers import AutoConfig

    paths = [("verifier.model", spec.verifier.model)]
    paths += [(f"strategies.{s.name}.model", s.model) for s in spec.strategies if s.draft == "neural"]
    for key, value in paths:
        if value and os.path.isabs(value):
            try:
                AutoConfig.from_pretrained(value)
            except (OSError, ValueError) as err:
                raise ModelError(f"{key}: {value} is not a loadable model ({str(err).splitlines()[0][:120]})") from err


def prepare(spec: Spec) -> tuple[Spec, list[TaskPrompts], list[CellSpec]]:
    """Resolve built-in sources, check paths and models, load prompts, expand the grid."""
    from orchestrator.builtin import materialize

    spec = materialize(spec)
    check_paths(spec)
    preflight_models(spec)
    prompts = load_prompts(spec)
    return spec, prompts, expand(spec, prompts)


def runner_config(spec: Spec, threads: int | None) -> RunnerConfig:
    v = spec.verifier
    return RunnerConfig(model=v.model, tokenizer=v.tokenizer, revision=v.revision, dtype=v.dtype, device=v.device,
                        max_new_tokens=spec.sweep.max_new_tokens, warmup=spec.sweep.warmup,
                        power_sources=tuple(spec.power.sources), power_hz=spec.power.hz,
                        idle_baseline_s=spec.power.idle_baseline_s, threads=threads)


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
        stmt = select(Experiment).order_by(Experiment.id.desc())
        exp = s.scalars(stmt.where(Experiment.name == experiment) if experiment else stmt).first()
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
        ray.init(num_cpus=opts.num_cpus or os.cpu_count(), resources={"accelerator": 1}, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    return True


class _Loop:
    """One pass of the scheduler over an experiment's pending cells."""

    def __init__(self, spec: Spec, exp_id: int, Session: sessionmaker, opts: RunOptions, progress: Progress):
        self.spec, self.exp_id, self.Session, self.opts, self.progress = spec, exp_id, Session, opts, progress
        self.max_attempts = spec.experiment.max_attempts
        self.trains: dict[Any, int] = {}         # ObjectRef -> train cell id
        self.batches: dict[Any, tuple[list[int], Any]] = {}  # ObjectRef -> (cell ids, the actor running them)
        self.queue: deque[int] = deque()         # pending sweep/reference cell ids, in run order
        self.actor = None
        self.label = ""

    # -- bookkeeping
    def _counts(self, s: Session) -> tuple[int, int, int]:
        counts = state_counts(s, self.exp_id)  # one grouped query: this runs after every result
        return sum(counts.values()), counts["done"], counts["failed"]

    def _report(self) -> None:
        with self.Session() as s:
            _, done, failed = self._counts(s)
        self.progress.update(done, failed, self.label)

    def run(self) -> None:
        with self.Session() as s:
            total, done, failed = self._counts(s)
            self.progress.start(total, done, failed)
            self._submit_trains(s)
            self._fill_queue(s)
        try:
            while self.trains or self.batches or self._sweep_ready():
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

        for ref in self.trains:
            ray.cancel(ref, force=True)
        if self.actor is not None:
            ray.kill(self.actor, no_restart=True)  # its batch in flight is lost, its cells are re-run on resume
            self.actor = None
        with self.Session() as s:
            store.reset_running(s, self.exp_id)
            s.commit()

    # -- training
    def _submit_trains(self, s: Session) -> None:
        cells = s.scalars(select(Cell).where(Cell.experiment_id == self.exp_id, Cell.kind == "train",
                                             Cell.state == "pending")).all()
        if not cells:
            return
        store.mark_running(s, [c.id for c in cells], worker="ray-cpu")
        s.commit()
        for c in cells:
            self.trains[self._train_call(c)] = c.id

    def _train_call(self, c: Cell):
        from workers.trainer import train_task

        corpus = self.spec.corpus(c.corpus)
        return train_task.remote(corpus.source(), c.params["tokenizer"], self.spec.experiment.artifacts,
                                   window=corpus.window, backend=corpus.backend, order=corpus.order,
                                   max_tokens=corpus.max_tokens, shards=corpus.shards, memory_gb=corpus.memory_gb,
                                   power_sources=tuple(self.spec.power.sources), power_hz=self.spec.power.hz)

    def _train_done(self, ref, s: Session) -> None:
        import ray

        cell = s.get(Cell, self.trains.pop(ref))
        try:
            info = ray.get(ref)
        except (ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError) as err:
            cause = getattr(err, "cause", None) or err
            final = store.mark_failure(s, cell, f"{type(cause).__name__}: {cause}", self.max_attempts)
            if final:
                self._fail_dependents(s, cell)
            else:
                store.mark_running(s, [cell.id], worker="ray-cpu")
                self.trains[self._train_call(cell)] = cell.id
            return
        store.store_ibase(s, cell, info)
        store.mark_finished(cell, "ray-cpu")

    def _fail_dependents(self, s: Session, train: Cell) -> None:
        """Olifant cells whose instance base could not be built fail with the reason."""
        for c in s.scalars(select(Cell).where(Cell.experiment_id == self.exp_id, Cell.kind == "sweep",
                                              Cell.draft == "olifant", Cell.corpus == train.corpus,
                                              Cell.state == "pending")):
            c.state, c.error = "failed", f"instance base for corpus {train.corpus!r} failed: {train.error}"

    # -- the accelerator
    def _fill_queue(self, s: Session) -> None:
        kind_order = {"reference": 0, "sweep": 1}
        cells = s.execute(select(Cell.id, Cell.kind, Cell.strategy, Cell.task, Cell.regime, Cell.prompt_index, Cell.k)
                          .where(Cell.experiment_id == self.exp_id, Cell.kind != "train", Cell.state == "pending")).all()
        cells = sorted(cells, key=lambda c: (kind_order[c.kind], c.strategy or "", c.task, c.regime or "",
                                             c.k or 0, c.prompt_index))
        self.queue = deque(c.id for c in cells)

    def _sweep_ready(self) -> bool:
        return bool(self.queue) and (self.spec.experiment.overlap or not self.trains)

    def _ensure_actor(self, s: Session) -> None:
        if self.actor is not None:
            return
        from workers.accelerator import AcceleratorWorker

        cls = self.opts.worker_cls or AcceleratorWorker
        cpus = os.cpu_count() or 1
        threads = max(1, cpus - 1) if self.spec.experiment.overlap else cpus
        options = {"runtime_env": {"env_vars": self.opts.worker_env}} if self.opts.worker_env else {}
        self.actor = cls.options(**options).remote(runner_config(self.spec, threads))
        import ray

        info = ray.get(self.actor.info.remote())  # waits for the verifier to load; fails fast on a bad model
        store.set_device(s, self.exp_id, info["device"], info.get("idle_power_w"))

    def _next_batch(self, s: Session, paths: dict[str, str]) -> list[Cell]:
        """Up to batch_size queued cells of one strategy whose inputs (instance base: `paths`) are ready."""
        batch, skipped = [], deque()
        while self.queue and len(batch) < self.spec.experiment.batch_size:
            cell = s.get(Cell, self.queue.popleft())
            if cell.state != "pending":
                continue
            if cell.draft == "olifant" and cell.corpus not in paths:
                skipped.append(cell.id)
                continue
            if batch and (cell.strategy, cell.kind) != (batch[0].strategy, batch[0].kind):
                self.queue.appendleft(cell.id)
                break
            batch.append(cell)
        self.queue.extendleft(reversed(skipped))
        return batch

    def _dispatch(self) -> None:
        if not self._sweep_ready():
            return
        with self.Session() as s:
            paths = store.ibase_paths(s, self.exp_id)
            while len(self.batches) < IN_FLIGHT and self.queue:
                batch = self._next_batch(s, paths)
                if not batch:
                    break
                self._ensure_actor(s)
                store.mark_running(s, [c.id for c in batch], worker="accelerator")
                payload = [_cell_dict(c, paths) for c in batch]
                s.commit()
                self.batches[self.actor.run_batch.remote(payload)] = ([c.id for c in batch], self.actor)
                self.label = batch[0].strategy or batch[0].kind

    def _batch_done(self, ref, s: Session) -> None:
        import ray

        ids, actor = self.batches.pop(ref)
        try:
            out = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.WorkerCrashedError) as err:
            logger.warning("accelerator worker died during a batch of %d cells; retrying them", len(ids))
            if actor is self.actor:  # a fresh worker (verifier reloaded) takes the retried cells
                ray.kill(actor, no_restart=True)
                self.actor = None
            for cid in ids:
                cell = s.get(Cell, cid)
                if not store.mark_failure(s, cell, f"worker died: {type(err).__name__}", self.max_attempts):
                    self.queue.appendleft(cid)
            return
        by_key = {c.key: c for c in (s.get(Cell, cid) for cid in ids)}
        for r in out["results"]:
            cell = by_key[r.key]
            if not r.ok:
                if not store.mark_failure(s, cell, r.error, self.max_attempts):
                    self.queue.append(cell.id)
                continue
            if cell.kind == "reference":
                store.store_reference(s, cell, r.payload)
            else:
                store.store_generation(s, cell, r.payload)
            store.mark_finished(cell, r.worker)
        store.store_samples(s, self.exp_id, out["samples"])

    def _collect(self) -> None:
        import ray

        pending = list(self.trains) + list(self.batches)
        if not pending:
            return
        ready, _ = ray.wait(pending, num_returns=1, timeout=WAIT_S)
        if not ready:
            return
        with self.Session() as s:
            for ref in ready:
                (self._train_done if ref in self.trains else self._batch_done)(ref, s)
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


def _cell_dict(c: Cell, ibase_paths: dict[str, str]) -> dict[str, Any]:
    """What the worker gets for a cell; an olifant cell also gets its instance base's path (not stored)."""
    params = {**c.params, "ibase_path": ibase_paths[c.corpus]} if c.draft == "olifant" else c.params
    return {"key": c.key, "kind": c.kind, "strategy": c.strategy, "draft": c.draft, "task": c.task,
            "corpus": c.corpus, "prompt_index": c.prompt_index, "k": c.k, "regime": c.regime, "params": params}
