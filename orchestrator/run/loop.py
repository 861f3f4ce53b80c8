"""One pass over an experiment's pending cells: the `Scheduler` between a Ray dispatcher and a result writer.

Artifact cells (instance bases, datastores, distilled bases) run as Ray CPU tasks in parallel; label, reference
and sweep cells go in batches of one strategy to the single accelerator worker, `in_flight` batches queued so it
never idles; results are stored in completion order (`ray.wait`). A failed cell is retried up to `max_attempts`,
then stored as failed with its error while the sweep goes on, and so are the cells that needed it; a worker that
dies mid-batch is replaced and its cells retried. A cell that finds its artifact missing or corrupt has the
artifact rebuilt (once per run) without losing an attempt.

The Ray side (submitting, collecting, cancelling) is `orchestrator.run.dispatcher.Dispatcher`; the storage side
(results, failures, retries) is `orchestrator.run.writer.ResultWriter`; this loop builds the jobs and turns the
crank.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from orchestrator.run.accelerator_actor import IN_FLIGHT
from orchestrator.run.cells import COST_ROLE
from orchestrator.run.dispatcher import Dispatcher
from orchestrator.run.lease import ExperimentLease
from orchestrator.run.options import PREDICTED, Interrupted, Progress, RunOptions, Sessions, left_text
from orchestrator.run.ray_startup import check_interrupt, interrupt_handled
from orchestrator.run.replay_costs import ReplayCosts
from orchestrator.run.scheduler import REPLAY_BATCH, Scheduler
from orchestrator.run.second_timings import second_timings_due
from orchestrator.run.spec import Spec
from orchestrator.run.writer import ResultWriter, pending_work
from storage import store
from storage.cell_spec import CellSpec
from storage.models import Reference
from storage.queries import status_counts, timed_twins_s
from workers.contracts import Coordinates, LabelJob, ReplayJob, SweepJob
from workers.training.label_progress import progress_file, read_progress

logger = logging.getLogger(__name__)
# what a progress line names as the run's stage, by the kind of cell the accelerator worker runs
STAGES = {"reference": "references", "label": "verifier labels", "costmodel": "cost model"}

HEARTBEAT_S = 5.0  # the progress between results: how often its clock and a label job's count move
# the progress after results at most this often: its counts are two grouped queries over every cell of the
# experiment, which at 10^5-10^6 cells would cost more than the results a collect round stores
REPORT_EVERY_S = 0.5
WAIT_S = 1.0  # ray.wait timeout; bounds how late a Ctrl-C or a state change is noticed
# The accelerator worker holds a CPU while it lives. Once it only waits for the replays (the timed cells run after
# them), it is stopped so that one more replay task runs, and started again for the timed cells: a restart costs
# seconds (imports, the verifier's load), so only where at least this many replay cells are left for the freed CPU.
RELEASE_MIN_REPLAYS = 4 * REPLAY_BATCH
PREDICT_EVERY_S = 30.0  # how often the timed cells' prediction is read again while the replays are stored


class SweepLoop:
    """Runs an experiment's pending cells to done or failed, writing each result as it arrives."""

    def __init__(
        self,
        spec: Spec,
        exp_id: int,
        Session: Sessions,
        opts: RunOptions,
        progress: Progress,
        lease: ExperimentLease | None = None,
    ):
        self.spec, self.exp_id, self.progress, self.lease = spec, exp_id, progress, lease
        work = pending_work(Session, exp_id)
        e = spec.experiment
        self.sched = Scheduler(
            work.cells,
            e.batch_size,
            e.max_attempts,
            overlap=e.overlap,
            in_flight=IN_FLIGHT,
            built=set(work.paths) | work.prerequisites,
            order=spec.sweep.order,
        )
        self.costs = ReplayCosts(Session, exp_id)
        self.writer = ResultWriter(Session, exp_id, self.sched, self.costs, work)
        self.paths = self.writer.paths  # artifact cell key -> file, as the writer records builds
        self.dispatcher = Dispatcher(spec, opts)
        self.label = self.stage = ""
        self._labelling: dict[str, Path] = {}  # running label cells' keys -> their progress files
        self._beat = self._reported = time.monotonic()
        self._predict_at, self._predicted = 0.0, {}

    def _report(self) -> None:
        self._reported = time.monotonic()
        _, done, failed = self.writer.counts()
        self._kinds()
        self.progress.update(done, failed, self.label, self.stage)

    def _kinds(self) -> None:
        """The cells by kind and state, for a progress that counts them and weighs its ETA by kind; with the timed
        cells' predicted seconds (`PREDICTED`) while none of them has run."""
        if (tell := getattr(self.progress, "kinds", None)) is None:
            return
        with self.writer.Session() as s:
            counts = status_counts(s, self.spec.experiment.name)
            if counts["sweep"]["done"] + counts["sweep"]["failed"] == 0 and time.monotonic() >= self._predict_at:
                self._predict_at = time.monotonic() + PREDICT_EVERY_S
                self._predicted = self._timed_prediction(timed_twins_s(s, self.exp_id))
        tell({**counts, PREDICTED: self._predicted} if self._predicted else counts)

    def _timed_prediction(self, twins: list[tuple[str, float]]) -> dict[str, float]:
        """{"timed": seconds per cell}: the mean over the timed cells left of their replayed twins' predicted seconds,
        times the runs each makes (twice for the `timed_twice` sample); {} before any twin is stored."""
        if not twins:
            return {}
        sweep = self.spec.sweep
        runs = [(sweep.timed_runs(key, 0.0) or 1) * wall for key, wall in twins]
        return {"timed": sum(runs) / len(runs)}

    def run(self) -> None:
        total, done, failed = self.writer.start(self.sched.orphans)
        self._kinds()
        self.progress.start(total, done, failed)
        try:
            while self.sched.busy() or self.dispatcher.busy():
                check_interrupt()  # one swallowed on the way (in a gc callback) stops the run here
                if self.lease is not None:
                    self.lease.check()
                self._submit_artifacts()
                self._dispatch()
                self._dispatch_replays()
                self._release_idle_actor()
                self._collect()
            self._second_timings()
        except KeyboardInterrupt:
            interrupt_handled()
            self._stop()
            raise Interrupted("interrupted: running cells were put back; `greenspec resume` continues") from None
        finally:
            self.dispatcher.close()

    def _stop(self) -> None:
        """Ctrl-C: stop training tasks and the worker at once; their cells go back to pending."""
        self.dispatcher.cancel()
        self.writer.reset_running()

    def _collect(self) -> None:
        events = self.dispatcher.collect(WAIT_S)
        if not events:
            self._heartbeat()
            return
        self.writer.store(events)
        if time.monotonic() - self._reported >= REPORT_EVERY_S or not (self.sched.busy() or self.dispatcher.busy()):
            self._report()

    def _heartbeat(self) -> None:
        """Between results, every HEARTBEAT_S: the progress again (its clock and ETA move during a long cell), with a
        running label job's own count of positions."""
        now = time.monotonic()
        if now - self._beat < HEARTBEAT_S:
            return
        self._beat = now
        for key, path in list(self._labelling.items()):
            if (p := read_progress(path)) is not None:
                if p["done"] >= p["total"]:  # labelled: what is left of the cell is writing its files
                    del self._labelling[key]
                eta = left_text(p.get("eta_s") or 0)
                self.label = f"{p['name']} {p['done']:,}/{p['total']:,} positions, {p['rate']:,.0f}/s, ETA {eta}"
        self._report()

    def _second_timings(self) -> None:
        """The `[sweep] timed_twice` sample's second timings, once every first timing of the run is stored, in the
        order of the first ones: a generation's two timings are minutes apart, as a table and the timings it predicts
        are, so the run's noise holds the machine's drift, not only the jitter of two runs back to back. Each batch is
        stored as it ends; those left by a kill are found again on resume (`second_timings_due`)."""
        with self.writer.Session() as s:
            due = second_timings_due(self.spec, s, self.exp_id)
            cells = {c.key: c for c in store.cell_specs(s, self.exp_id, ["sweep"], "done", {k for _, k in due})}
        due = [(gen_id, key) for gen_id, key in due if key in cells]

        def show(done: int) -> None:
            self.stage, self.label = "second timings", f"{done}/{len(due)} (the run's timing noise)"
            self._report()

        size = max(1, self.spec.experiment.batch_size)
        for lo in range(0, len(due), size):
            chunk = due[lo : lo + size]
            self._ensure_actor()
            show(lo)
            jobs = [replace(self._job(cells[key]), pace=False) for _, key in chunk]
            outcome = self.dispatcher.run_now(jobs, WAIT_S, self._between)
            if outcome is not None:
                self.writer.store_second_timings(chunk, outcome)
        if due:
            show(len(due))  # the last line shows them all done
            logger.info("%d second timings run after the first ones", len(due))

    def _between(self) -> None:
        """While the worker runs a batch waited on: a Ctrl-C lands, the lease stays held, the progress's clock moves."""
        check_interrupt()
        if self.lease is not None:
            self.lease.check()
        self._heartbeat()

    # -- artifacts on CPU workers
    def _submit_artifacts(self) -> None:
        cells = self.sched.start_artifacts()
        if not cells:
            return
        self.writer.mark_running(cells, "ray-cpu")
        for c in cells:
            self.dispatcher.submit_artifact(c, self.paths)
        self.stage = "training"

    # -- the accelerator
    def _ensure_actor(self) -> None:
        started = self.dispatcher.ensure_actor()
        if started is not None:
            info, self.sched.in_flight = started
            self.writer.set_device(info)

    def _release_idle_actor(self) -> None:
        """Stop the accelerator worker while it only waits for the replays, so its CPU replays too (see
        RELEASE_MIN_REPLAYS); `_ensure_actor` starts a fresh one for the timed cells."""
        if self.dispatcher.actor is not None and self.sched.accelerator_waits_for_replays(RELEASE_MIN_REPLAYS):
            logger.info("accelerator worker stopped while %d replay cells run on its CPU too", len(self.sched.replays))
            self.dispatcher.close()

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
            cell=self._coordinates(c),
            kind=c.kind,
            prompt=p.prompt,
            costs=self.costs.model_json(dict(c.needs)[COST_ROLE]) if COST_ROLE in dict(c.needs) else None,
            temperature=c.temperature or 0.0,
            top_k=p.top_k,
            top_p=p.top_p,
            seed=p.seed,
            pace=c.kind == "sweep" and self.spec.sweep.replay and not c.temperature,
        )

    def _dispatch(self) -> None:
        while batch := self.sched.next_batch():
            self._ensure_actor()
            self.writer.mark_running(batch, "accelerator")
            self.dispatcher.submit_batch(batch, [self._job(c) for c in batch])
            self.label = batch[0].strategy or ""  # a reference, label or cost-model batch: its stage says it
            self.stage = STAGES.get(batch[0].kind, "timed cells")
            for c in batch:
                if c.kind == "label":
                    self._labelling[c.key] = progress_file(self.spec.experiment.artifacts, c.key)

    # -- replays on CPU workers
    def _coordinates(self, c: CellSpec) -> Coordinates:
        """A reference, sweep or replay cell's coordinates as its worker needs them, with the files of the artifacts
        its draft reads (its reference and the cost model are not files)."""
        artifacts = {role: self.paths[key] for role, key in c.needs if role not in ("reference", COST_ROLE)}
        return Coordinates(c.key, c.strategy, c.draft, c.params.options, artifacts, c.k or 0, c.regime)

    def _dispatch_replays(self) -> None:
        cpus = self.dispatcher.cpus()
        while batch := self.sched.next_replay_batch(cpus):
            jobs = self.writer.replay_jobs(batch, self._replay_job)
            tokenizer = self.spec.verifier.tokenizer or self.spec.verifier.model
            self.dispatcher.submit_replays(batch, jobs, tokenizer, self.exp_id, self.costs.predictor())
            self.label = f"{batch[0].strategy} (replay)"
            self.stage = "replays"

    def _replay_job(self, c: CellSpec, ref: Reference) -> ReplayJob:
        """What a CPU worker gets for a replayed cell: its coordinates and its prompt's reference."""
        return ReplayJob(
            cell=self._coordinates(c),
            prompt_tokens=tuple(ref.prompt_tokens),
            reference=tuple(ref.tokens),
            text=ref.text,
            vocab_size=ref.vocab_size,
            eos_id=ref.eos_id,
            max_new_tokens=self.spec.sweep.max_new_tokens,
            costs=self.costs.model_json(dict(c.needs)[COST_ROLE]) if c.params.options.get("auto") else None,
        )
