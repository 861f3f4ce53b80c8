"""`greenspec`: a thin shell over the library. Each command is a few lines; errors become one line here.

Global options come before the command: `greenspec --db sqlite:///runs.db status --json`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys

import click

from storage.db import DEFAULT_URL
from workers.errors import GreenspecError

logger = logging.getLogger("greenspec")
MAX_POWER_S = 86_400  # `greenspec power --seconds`: at most a day


class Context:
    def __init__(self, db: str, address: str | None, debug: bool):
        self.db, self.address, self.debug = db, address, debug


def setup_logging(debug: bool) -> None:
    """Logging configured once, here: warnings by default, everything with --debug."""
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("urllib3", "filelock", "alembic", "matplotlib", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not debug:
        logging.getLogger("orchestrator").setLevel(logging.INFO if os.environ.get("GREENSPEC_VERBOSE") else logging.WARNING)


_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def masked(line: str) -> str:
    """An error line with any URL's password replaced by ***, e.g. postgresql://me:***@host/db."""
    return _PASSWORD.sub(r"\1***@", line)


class GreenspecGroup(click.Group):
    """Turns domain errors into one line and a non-zero exit (a traceback only with --debug)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GreenspecError as err:
            if ctx.obj is not None and getattr(ctx.obj, "debug", False):
                raise
            click.echo(masked(f"greenspec: error: {err}"), err=True)
            sys.exit(130 if type(err).__name__ == "Interrupted" else 2)
        except KeyboardInterrupt:  # before the driver's own handling began (loading, the lease): nothing written
            if ctx.obj is not None and getattr(ctx.obj, "debug", False):
                raise
            click.echo("greenspec: error: interrupted", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except Exception as err:  # the CLI boundary: one line, never a raw traceback (--debug shows it)
            if ctx.obj is not None and getattr(ctx.obj, "debug", False):
                raise
            first = (str(err).splitlines() or [""])[0][:200]
            click.echo(masked(f"greenspec: error: unexpected {type(err).__name__}: {first} (rerun with --debug for details)"),
                       err=True)
            sys.exit(1)


@click.group(cls=GreenspecGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", default=lambda: os.environ.get("GREENSPEC_DB", DEFAULT_URL), show_default=DEFAULT_URL,
              help="SQLAlchemy URL of the results database (env GREENSPEC_DB).")
@click.option("--address", default=None, help="Ray cluster address (default: start a local Ray).")
@click.option("--debug", is_flag=True, help="Verbose logs and full tracebacks.")
@click.version_option(package_name="greenspec")
@click.pass_context
def main(ctx: click.Context, db: str, address: str | None, debug: bool) -> None:
    """greenspec: speed and energy of memory-based (Olifant/IGTree) speculative decoding.

    \b
    Example:
      greenspec demo                       # offline demo end to end, then the dashboard command
      greenspec validate examples/paper.toml
      greenspec run examples/demo.toml && greenspec status
    """
    setup_logging(debug)
    ctx.obj = Context(db, address, debug)


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
def validate(spec: str) -> None:
    """Check a spec and print the size of its grid.

    \b
    Example:
      greenspec validate examples/paper.toml
    """
    from orchestrator.prepare import validate_spec
    from orchestrator.spec import load_spec

    s = load_spec(spec)
    validate_spec(s)
    click.echo(s.summary())


def _run_options(obj: Context, wait: bool = False, drop_stale: bool = False):
    from orchestrator.driver import RunOptions

    return RunOptions(db_url=obj.db, address=obj.address, wait=wait, drop_stale=drop_stale)


WAIT = click.option("--wait", is_flag=True, help="If another driver runs this experiment, wait for it instead of refusing.")
DROP_STALE = click.option("--drop-stale", is_flag=True,
                          help="Drop unfinished cells of an earlier version of the spec (refused otherwise).")


def _print_report(report, db: str) -> None:
    """The run's counts; with failed cells, a last line naming how many and exit 1 (2 stays for refused input)."""
    c = report.counts
    click.echo(f"{report.experiment}: {c['done']} done, {c['failed']} failed, {c['pending']} pending "
               f"({report.added} new cells, {report.elapsed_s:.0f} s). Results in {db}.")
    if c["failed"]:
        click.echo(f"{c['failed']} cell{'s' if c['failed'] != 1 else ''} failed: `greenspec status` shows their errors; "
                   "`greenspec retry --failed` runs them again.")
        sys.exit(1)


FORCE = click.option("--force", is_flag=True, help="Replace --out if the file exists (never a database).")


def _check_out(obj: Context, out: str | None, force: bool) -> None:
    """Refuse an --out that is a database or an existing file (without --force), before any work."""
    from orchestrator.outputs import check_out_path
    from storage.db import sqlite_path

    if out is not None and out != "-":
        check_out_path(out, "--out", force, sqlite_path(obj.db))


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@WAIT
@DROP_STALE
@click.pass_obj
def run(obj: Context, spec: str, wait: bool, drop_stale: bool) -> None:
    """Run every cell of SPEC not already done (re-running adds only new cells).

    \b
    Example:
      greenspec --db sqlite:///runs.db run examples/demo.toml
    """
    from orchestrator.driver import run_spec_file
    from orchestrator.progress import BarProgress

    with BarProgress() as bar:
        report = run_spec_file(spec, _run_options(obj, wait, drop_stale), bar)
    _print_report(report, obj.db)


@main.command()
@click.option("--experiment", "-e", default=None, help="Experiment name (default: the newest).")
@WAIT
@DROP_STALE
@click.pass_obj
def resume(obj: Context, experiment: str | None, wait: bool, drop_stale: bool) -> None:
    """Continue an interrupted or killed run from the database.

    \b
    Example:
      greenspec resume -e demo
    """
    from orchestrator.driver import resume as do_resume
    from orchestrator.progress import BarProgress

    with BarProgress() as bar:
        report = do_resume(_run_options(obj, wait, drop_stale), experiment, bar)
    _print_report(report, obj.db)


@main.command()
@click.option("--failed", is_flag=True, required=True, help="Run failed cells again (attempts reset).")
@click.option("--experiment", "-e", default=None, help="Experiment name (default: the newest).")
@WAIT
@DROP_STALE
@click.pass_obj
def retry(obj: Context, failed: bool, experiment: str | None, wait: bool, drop_stale: bool) -> None:
    """Run failed cells again.

    \b
    Example:
      greenspec retry --failed
    """
    from orchestrator.driver import resume as do_resume
    from orchestrator.progress import BarProgress

    with BarProgress() as bar:
        report = do_resume(_run_options(obj, wait, drop_stale), experiment, bar, retry_failed=True)
    _print_report(report, obj.db)


def _reader(db: str):
    """A read-only session factory; None when the database has no greenspec schema yet."""
    from storage.db import open_reader

    return open_reader(db)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable counts.")
@click.option("--experiment", "-e", default=None, help="Only this experiment.")
@click.pass_obj
def status(obj: Context, as_json: bool, experiment: str | None) -> None:
    """Cell counts by state, and failures with their errors.

    \b
    Example:
      greenspec status --json
    """
    from storage import queries

    Session = _reader(obj.db)
    if Session is None and experiment:
        raise GreenspecError(f"no experiment {experiment!r} in {obj.db}")
    if Session is None:
        empty = {s: 0 for s in ("pending", "running", "done", "failed")}
        counts = {"experiment": None, "cells": empty, "sweep": dict(empty), "generations": 0, "experiments": {}}
        click.echo(json.dumps(counts) if as_json else "no experiments yet")
        return
    with Session() as s:
        names = _experiment_names(s, experiment, obj.db)
        counts = queries.status_counts(s, experiment)
        per = {n: queries.status_counts(s, n) for n in ([experiment] if experiment else names)}
        fails = {n: queries.failures_frame(s, queries.experiment_id(s, n)) for n in per}
    if as_json:
        click.echo(json.dumps({**counts, "experiments": per}))
        return
    if not per:
        click.echo("no experiments yet")
    for name, c in per.items():
        _print_status(name, c, fails[name])


def _experiment_names(s, experiment: str | None, db: str) -> list[str]:
    """The stored experiments' names; refuses an `--experiment` that is not among them."""
    from storage import queries

    names = list(queries.experiments_frame(s)["name"])
    if experiment and experiment not in names:
        raise GreenspecError(f"no experiment {experiment!r} in {db} (known: {', '.join(names) or 'none'})")
    return names


def _print_status(name: str, counts: dict, fails) -> None:
    """One experiment's counts and its first failures."""
    c, w = counts["cells"], counts["sweep"]
    click.echo(f"{name}: cells {c['done']} done, {c['running']} running, {c['pending']} pending, {c['failed']} failed")
    click.echo(f"  sweep: {w['done']} done, {w['running']} running, {w['pending']} pending, {w['failed']} failed; "
               f"{counts['generations']} generations stored")
    if fails is not None and not fails.empty:
        click.echo("  failed cells:")
        for r in fails.head(20).itertuples():
            click.echo(f"    {_failure_line(r)}")


def _failure_line(r) -> str:
    """A failed cell in one line: its kind and the coordinates it has (no `nan` for the ones it has not)."""
    def given(v) -> bool:
        return v is not None and v == v and v != ""  # v != v: NaN, as pandas fills a missing number

    parts = [r.kind, *(str(v) for v in (r.strategy, r.corpus, r.task) if given(v))]
    if given(r.k) and (r.kind == "sweep" or int(r.k)):
        parts.append(f"k={int(r.k)}")
    if given(r.regime):
        parts.append(str(r.regime))
    error = str(r.error).splitlines()[0] if given(r.error) and str(r.error).strip() else ""
    return f"{' '.join(parts)}: {error}"


@main.command()
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet", "markdown", "latex"]), default="csv", show_default=True)
@click.option("--out", "out", type=click.Path(dir_okay=False), default="-", help="Output file (default: stdout).")
@click.option("--experiment", "-e", default=None, help="Experiment name (default: the newest).")
@click.option("--compare", "compare_with", type=click.Choice(["paper"]), default=None,
              help="Instead: the run's numbers beside the seed paper's, cell by cell, with differences.")
@click.option("--pooled", is_flag=True, help="Ratios of sums over each cell instead of the paper's per-prompt means.")
@FORCE
@click.pass_obj
def export(obj: Context, fmt: str, out: str, experiment: str | None, compare_with: str | None, pooled: bool,
           force: bool) -> None:
    """One row per strategy x task x k x regime with speed, acceptance, quality and energy.

    \b
    Example:
      greenspec export --format latex --out table.tex
      greenspec export --compare paper --format markdown
    """
    from orchestrator.export import write_summary

    _check_out(obj, out, force)
    Session = _reader(obj.db)
    if Session is None:
        raise GreenspecError(f"{obj.db}: no results yet; start with `greenspec demo` or `greenspec run SPEC`")
    with Session() as s:
        _experiment_names(s, experiment, obj.db)
        if compare_with == "paper":
            from orchestrator.paper_compare import write_comparison

            write_comparison(s, experiment, fmt, out)
            return
        write_summary(s, experiment, fmt, out, pooled)
        _say_superseded(s, experiment)


def _say_superseded(session, experiment: str | None) -> None:
    """One line on stderr when the export left out generations of an earlier version of the spec."""
    from storage.queries import experiment_id
    from storage.summary import superseded

    exp_id = experiment_id(session, experiment)
    if exp_id is not None and (n := superseded(session, exp_id)):
        click.echo(f"export: {n} generations of an earlier version of the spec left out: each cell coordinate and prompt "
                   "shows its newest generation", err=True)


@main.command()
@click.option("--port", default=8501, show_default=True, type=int, help="TCP port, 1-65535.")
@click.pass_obj
def dashboard(obj: Context, port: int) -> None:
    """Open the Streamlit dashboard on 127.0.0.1.

    \b
    Example:
      greenspec --db sqlite:///greenspec.db dashboard --port 8501
    """
    from dashboard.launch import launch, port_free

    if not 1 <= port <= 65535:
        raise GreenspecError(f"--port {port}: give a TCP port from 1 to 65535")
    if not port_free(port):
        raise GreenspecError(f"--port {port}: 127.0.0.1:{port} is already in use (another dashboard?); pick another port")
    click.echo(f"dashboard: http://127.0.0.1:{port}  (database {obj.db}; Ctrl-C stops)")
    sys.exit(launch(obj.db, port))


@main.command()
@click.option("--retrain", is_flag=True, help="Rebuild the demo models even if cached.")
@click.option("--spec", "spec_path", default=None, help="Demo spec (default: the bundled examples/demo.toml).")
@click.option("--toy", is_flag=True, help="The toy demo (examples/demo-toy.toml): a small verifier trained here.")
@click.pass_obj
def demo(obj: Context, retrain: bool, spec_path: str | None, toy: bool) -> None:
    """Offline demo: SmolLM2-135M verifies every draft on Shakespeare, Python docs and license texts, then a summary
    and the paper's findings checked on the run.

    \b
    Example:
      greenspec demo && greenspec dashboard
      greenspec --db sqlite:///toy.db demo --toy
    """
    from orchestrator.demo import DEMO_SPEC, run_demo

    if toy and spec_path:
        raise GreenspecError("--toy and --spec: give one (--toy is --spec examples/demo-toy.toml)")
    if toy:
        spec_path = str(DEMO_SPEC.with_name("demo-toy.toml"))

    run_demo(_run_options(obj), spec_path=spec_path, retrain=retrain, echo=click.echo)


@main.command()
@click.option("--seconds", default=5.0, show_default=True, type=float, help="How long to sample.")
@click.option("--source", "sources", multiple=True, default=("auto",), show_default=True,
              help="auto, nvml, rapl, powermetrics or estimate (repeatable).")
def power(seconds: float, sources: tuple[str, ...]) -> None:
    """List power sources, sample them, print mean watts (measured or estimated).

    \b
    Example:
      greenspec power --seconds 10
    """
    import math

    from workers.power import format_survey, survey

    if not (math.isfinite(seconds) and 0 < seconds <= MAX_POWER_S):
        raise GreenspecError(f"--seconds {seconds}: give a number of seconds above 0 and at most {MAX_POWER_S}")
    click.echo(format_survey(survey(seconds=seconds, names=sources)))


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--prompts", default=10, show_default=True, type=int, help="Prompts (contexts), round-robin over tasks.")
@click.option("--repeats", default=5, show_default=True, type=int, help="Timed single-token queries per prompt.")
@click.option("--timbl/--no-timbl", default=True, show_default=True, help="Also time olifant with TiMBL.")
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Also write the rows as CSV.")
@FORCE
@click.pass_obj
def latency(obj: Context, spec: str, prompts: int, repeats: int, timbl: bool, out: str | None, force: bool) -> None:
    """Standalone next-token latency of each strategy's draft, no verifier (the paper's §2.3); stored in --db.

    \b
    Example:
      greenspec latency examples/demo.toml --prompts 10 --repeats 5
    """
    from orchestrator.latency import (
        LatencyOptions,
        format_table,
        load_latency_spec,
        measure,
        rows_frame,
        store_rows,
        timbl_notes,
    )
    from orchestrator.outputs import write_failed

    _check_out(obj, out, force)
    opts = LatencyOptions(prompts=prompts, repeats=repeats, timbl=timbl)
    s = load_latency_spec(spec)
    rows = measure(s, opts)
    store_rows(obj.db, s.experiment.name, rows, prompts, repeats)
    click.echo(format_table(rows, timbl_notes(s, opts)))
    if out:
        try:
            rows_frame(rows).to_csv(out, index=False)
        except OSError as err:
            raise write_failed(out, "--out", err) from err


@main.command()
def doctor() -> None:
    """Versions, the accelerator found, and the power sources available.

    \b
    Example:
      greenspec doctor
    """
    from orchestrator.doctor import report

    click.echo(report())


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--corpus", required=True, help="The [[corpora]] name to train.")
@click.option("--out", default=None, type=click.Path(dir_okay=False),
              help="Write the instance base here (default: the spec's artifact store, where a run finds it).")
@click.option("--memory-gb", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Bound the training's resident memory (default: the corpus's memory_gb, else half the free memory).")
@FORCE
@click.pass_obj
def train(obj: Context, spec: str, corpus: str, out: str | None, memory_gb: float | None, force: bool) -> None:
    """Train one corpus's instance base exactly as a run would (resumes a killed training).

    \b
    Example:
      greenspec train examples/paper.toml --corpus fineweb --memory-gb 8
    """
    import math

    from orchestrator.train import TrainBar, TrainRequest, closing_line, train_corpus

    if memory_gb is not None and not math.isfinite(memory_gb):
        raise GreenspecError(f"--memory-gb {memory_gb}: give a finite number of gigabytes above 0")
    _check_out(obj, out, force)
    with TrainBar() as bar:
        info = train_corpus(TrainRequest(spec, corpus, out, memory_gb, obj.address), progress=bar)
    click.echo(closing_line(info))


if __name__ == "__main__":
    main()
