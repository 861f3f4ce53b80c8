"""The run's entry points: spec -> cells -> the database, under the experiment's lease, then the loop on Ray.

The driver is the database's one writer. `run` prepares the spec's cells in one pass (`orchestrator.run.prepare`:
resolve, check, expand; everything that can refuse bad input refuses before the first write), takes the
experiment's lease (`orchestrator.run.lease`: one driver per experiment; a second refuses with the holder's name,
or waits), registers the new cells, puts cells a dead driver left running back to pending, and runs the `SweepLoop`
(`orchestrator.run.loop`) on Ray (`orchestrator.run.ray_startup`) when there is something to run; nothing to run,
Ray is not started at all. Ctrl-C or SIGTERM ends in `Interrupted` with no cell left running and the Ray this run
started shut down.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import ray

from orchestrator.run.cells import Grid
from orchestrator.run.lease import ExperimentLease, LeaseHeld, LeaseLost  # noqa: F401 (LeaseHeld/Lost re-exported)
from orchestrator.run.loop import SweepLoop
from orchestrator.run.options import Interrupted, NoProgress, Progress, RunOptions, Sessions  # noqa: F401 (re-exported)
from orchestrator.run.prepare import prepare
from orchestrator.run.ray_startup import (
    interrupt_handled,
    interrupts_deferred,
    ray_initialized,
    ray_up,
    sticky_interrupts,
)
from orchestrator.run.second_timings import second_timings_due
from orchestrator.run.spec import Spec, spec_hash
from orchestrator.run.spec_paths import load_spec, read_spec
from orchestrator.run.summaries import keep_summaries
from storage import store
from storage.cost_tables import reprediction_of
from storage.db import Session, guard, open_db, sqlite_path
from storage.models import Experiment
from storage.names import rename_cells
from storage.queries import experiments_frame, state_counts, status_counts
from workers.errors import GreenspecError
from workers.power.idle import measure_idle_floor_w

logger = logging.getLogger(__name__)


class StaleCells(GreenspecError):
    """Unfinished cells keyed by an earlier version of the spec: they would run with today's settings."""


class OtherSpec(GreenspecError):
    """An experiment name already bound to another spec file."""


class Derived(GreenspecError):
    """A re-predicted experiment: predicted copies of another's generations, never run."""


@dataclass(frozen=True)
class RunReport:
    """What a run did: cells added this time and the final counts by state."""

    experiment: str
    added: int
    counts: dict[str, int]
    elapsed_s: float


def run_spec_file(path: str | Path, opts: RunOptions, progress: Progress | None = None) -> RunReport:
    """Load a spec file and run it (`greenspec run SPEC`)."""
    path = Path(path)
    spec = load_spec(path)  # refuses an unreadable or non-UTF-8 file in one line
    return run(spec, path.read_text(encoding="utf-8"), str(path.resolve()), opts, progress)


def resume(
    opts: RunOptions, experiment: str | None = None, progress: Progress | None = None, retry_failed: bool = False
) -> RunReport:
    """Continue an experiment from its stored spec (`greenspec resume`, `greenspec retry --failed`)."""
    path = sqlite_path(opts.db_url)
    if path is not None and path.parent.is_dir() and not path.exists():  # a mistyped --db: say so, create nothing
        raise GreenspecError(f"no database at {path} (--db {opts.db_url}); start one with `greenspec run SPEC`")
    engine, Session = open_db(opts.db_url)
    try:
        with guard(opts.db_url, "reading"), Session() as s:
            exp = store.find_experiment(s, experiment)
            if exp is None:
                known = ", ".join(sorted(experiments_frame(s)["name"])) or "none"
                raise GreenspecError(
                    f"no experiment {experiment!r} in {opts.db_url} (known: {known})"
                    if experiment
                    else f"no experiment in {opts.db_url}; start one with `greenspec run SPEC`"
                )
            _refuse_derived(s, exp)
            text, spec_path = exp.spec_toml, exp.spec_path
    finally:
        engine.dispose()
    return run(read_spec(text, spec_path), text, spec_path, opts, progress, retry_failed=retry_failed)


def run(
    spec: Spec,
    spec_text: str,
    spec_path: str | None,
    opts: RunOptions,
    progress: Progress | None = None,
    retry_failed: bool = False,
) -> RunReport:
    """Register the spec's cells (new ones only) and run every pending cell to done or failed."""
    t0 = time.perf_counter()
    registered = store.registered_digest(
        opts.db_url, spec.experiment.name
    )  # read only: nothing is written before prepare
    spec, _, cells = prepare(spec, registered)  # everything that can refuse bad input happens before the first write
    engine, Session = open_db(opts.db_url)
    try:
        report = _run_leased(spec, cells, (spec_text, spec_path), opts, Session, progress, retry_failed)
    finally:
        engine.dispose()  # no pooled connection outlives the run (SQLite then removes its -wal/-shm files)
    return replace(report, elapsed_s=time.perf_counter() - t0)


def _run_leased(
    spec: Spec,
    cells: Grid,
    source: tuple[str, str | None],
    opts: RunOptions,
    Session: Sessions,
    progress: Progress | None,
    retry_failed: bool,
) -> RunReport:
    """The run proper, under the experiment's lease: register the cells, reset dead ones, run the loop (on Ray
    only when there is something to run)."""
    name = spec.experiment.name
    with guard(opts.db_url), ExperimentLease(Session, name, opts.wait, opts.lease_s) as lease:
        exp_id, added = register(spec, cells, source, Session, retry_failed, opts)
        if _has_work(spec, Session, exp_id):
            with Session() as s:  # the idle floor, before Ray starts: the machine at rest (None where no meter exists)
                store.set_idle_power(s, exp_id, measure_idle_floor_w(spec.power.sources))
                s.commit()
            _run_on_ray(spec, exp_id, Session, opts, progress or NoProgress(), lease)
        else:
            logger.info("experiment %s: no cell to run; Ray not started", name)
        keep_summaries(Session, exp_id)  # the readers' summaries, stored as the run ends (orchestrator.run.summaries)
        with Session() as s:
            counts = status_counts(s, name)["cells"]
    return RunReport(name, added, counts, 0.0)


def register(
    spec: Spec, cells: Grid, source: tuple[str, str | None], Session: Sessions, retry_failed: bool, opts: RunOptions
) -> tuple[int, int]:
    """Store the experiment and its new cells, put cells left running (and, retrying, failed ones) back to pending;
    (experiment id, cells added). An experiment name bound to another spec file is refused (unless `new_version`),
    unfinished cells of an earlier spec version are refused or dropped, and cells stored under another task,
    strategy or corpus name take the spec's names (`storage.names`). A grid whose digest is the one the experiment
    registered last (a resume's) is registered already: its cells are neither expanded nor read again."""
    name, (spec_text, spec_path) = spec.experiment.name, source
    with Session() as s:
        if (exp := store.find_experiment(s, name)) is not None:
            _refuse_derived(s, exp)
        _refuse_other_spec(s, name, source, opts.new_version)
        same = exp is not None and exp.grid_digest is not None and exp.grid_digest == cells.digest
        if not same:
            _drop_or_refuse_stale(s, name, cells.keys(), opts.drop_stale)
        exp = store.upsert_experiment(s, name, spec_text, spec_hash(spec_text), spec_path)
        added = 0
        if not same:
            for renamed in rename_cells(s, exp.id, cells):
                logger.warning("experiment %s: %s", name, renamed.describe())
            added = store.add_cells(s, exp.id, cells)
        exp.grid_digest = cells.digest or None  # committed with the cells it describes
        reset = store.reset_running(s, exp.id)
        failed = store.retry_failed(s, exp.id) if retry_failed else 0
        s.commit()
    if reset or failed:
        logger.info("%d cells left running by an earlier driver and %d failed ones set back to pending", reset, failed)
    logger.info("experiment %s: %d new cells%s", name, added, " (its registered grid)" if same else "")
    return exp.id, added


def _refuse_derived(s: Session, exp) -> None:
    """A re-predicted experiment holds another device's predictions of its source's replayed generations: running
    it would time this machine under that device's label (its stored spec names the source); refused in one line."""
    if (derived := reprediction_of(s, exp.id)) is None:
        return
    source = s.get(Experiment, derived.source_id)
    raise Derived(
        f"experiment {exp.name!r} is {derived.label}, re-predicted from experiment {source.name!r}: it is not run "
        f"or resumed; resume {source.name!r}, then `greenspec costs repredict` it again"
    )


def _refuse_other_spec(s: Session, name: str, source: tuple[str, str | None], new_version: bool) -> None:
    """An experiment name stays bound to its spec file: another file's spec under the same name would merge two
    experiments' cells silently; refused in one line, before anything is written, unless `new_version`."""
    exp = store.find_experiment(s, name)
    text, path = source
    if exp is None or new_version or None in (path, exp.spec_path) or path == exp.spec_path or text == exp.spec_toml:
        return
    raise OtherSpec(
        f"experiment {name!r} is bound to another spec file ({exp.spec_path}); give {path} its own [experiment] "
        "name, or pass --new-version to continue the experiment under this spec"
    )


def _drop_or_refuse_stale(s: Session, name: str, keys: Iterable[str], drop: bool) -> None:
    """A cell runs as it was keyed or not at all: unfinished cells the spec no longer makes (another max_new_tokens,
    a removed strategy or prompt) are refused in one line, before anything is written, or dropped with `drop`."""
    exp = store.find_experiment(s, name)
    stale = store.stale_cells(s, exp.id, keys) if exp is not None else []
    if stale and not drop:
        raise StaleCells(
            f"experiment {name!r}: {len(stale)} unfinished cells were keyed by an earlier version of its "
            "spec (or of greenspec) and would run with this one's settings; pass --drop-stale to drop "
            "them, or run the earlier spec"
        )
    if stale:
        logger.warning(
            "experiment %s: dropped %d unfinished cells of an earlier version of its spec",
            name,
            store.drop_cells(s, stale),
        )


def _has_work(spec: Spec, Session: Sessions, exp_id: int) -> bool:
    """Whether a pending cell, a built artifact whose file is gone (rebuilt by the loop) or a second timing
    (`orchestrator.run.second_timings`) awaits."""
    with Session() as s:
        if state_counts(s, exp_id)["pending"] > 0 or store.missing_artifacts(s, exp_id):
            return True
        return bool(second_timings_due(spec, s, exp_id))


def _run_on_ray(
    spec: Spec, exp_id: int, Session: Sessions, opts: RunOptions, progress: Progress, lease: ExperimentLease
) -> None:
    """Start (or join) Ray and run the loop. Ctrl-C or SIGTERM at any moment, Ray's start-up included,
    ends in `Interrupted` with no cell left running and the Ray this run started shut down."""
    started_ray = not ray_initialized()  # then this run starts (or joins) Ray, and shuts it down (or leaves)
    try:
        with sticky_interrupts(signal.SIGINT, signal.SIGTERM):  # SIGTERM (kill, a scheduler's stop) as Ctrl-C
            with interrupts_deferred():  # a signal during ray.init lands once it returns (our handlers restored)
                ray_up(opts)
            SweepLoop(spec, exp_id, Session, opts, progress, lease).run()
    except (KeyboardInterrupt, SystemExit) as err:  # SystemExit: Ray's SIGTERM handler, if it struck inside init
        interrupt_handled()
        with Session() as s:
            store.reset_running(s, exp_id)
            s.commit()
        raise Interrupted("interrupted: running cells were put back; `greenspec resume` continues") from err
    finally:
        if started_ray:
            ray.shutdown()
