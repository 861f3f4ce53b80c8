"""`greenspec`: a thin shell over the library. Each command is a few lines; errors become one line here.

Global options come before the command: `greenspec --db sqlite:///runs.db status --json`. A command imports its
library when it runs (the driver imports Ray, the demo torch), so `greenspec --help` or a refused spec answers
without them.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import signal
import sys

import click

import orchestrator.cli.costs as cli_costs
import orchestrator.cli.findings as cli_findings
import orchestrator.cli.results as cli_results
import orchestrator.cli.tools as cli_tools
from orchestrator.cli.common import Context
from orchestrator.run.ray_startup import check_interrupt, interrupt_handled, sticky_interrupts
from storage.db import DEFAULT_URL
from workers.errors import GreenspecError

logger = logging.getLogger("greenspec")


def show_model_training() -> None:
    """The built-in models' training steps (minutes, on first use, before any cell runs) as the first progress."""
    logging.getLogger("workers.models.demo").setLevel(logging.INFO)


def setup_logging(debug: bool) -> None:
    """Logging configured once, here: warnings by default, everything with --debug."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("urllib3", "filelock", "alembic", "matplotlib", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not debug:
        logging.getLogger("orchestrator").setLevel(
            logging.INFO if os.environ.get("GREENSPEC_VERBOSE") else logging.WARNING
        )


_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def masked(line: str) -> str:
    """An error line with any URL's password replaced by ***, e.g. postgresql://me:***@host/db."""
    return _PASSWORD.sub(r"\1***@", line)


class GreenspecGroup(click.Group):
    """Turns domain errors into one line and a non-zero exit (a traceback only with --debug)."""

    def invoke(self, ctx: click.Context):
        try:
            # Ctrl-C, or SIGTERM (kill, a scheduler's stop), at any moment: one line, exit 130; one swallowed in a gc
            # callback still stops the command
            with sticky_interrupts(signal.SIGINT, signal.SIGTERM):
                result = super().invoke(ctx)
            check_interrupt()
            return result
        except GreenspecError as err:
            interrupt_handled()
            if ctx.obj is not None and getattr(ctx.obj, "debug", False):
                raise
            click.echo(masked(f"greenspec: error: {err}"), err=True)
            sys.exit(130 if type(err).__name__ == "Interrupted" else 2)
        except KeyboardInterrupt:  # before the driver's own handling began (loading, the lease): nothing written
            interrupt_handled()
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
            click.echo(
                masked(f"greenspec: error: unexpected {type(err).__name__}: {first} (rerun with --debug for details)"),
                err=True,
            )
            sys.exit(1)


@click.group(cls=GreenspecGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    default=lambda: os.environ.get("GREENSPEC_DB", DEFAULT_URL),
    show_default=DEFAULT_URL,
    help="SQLAlchemy URL of the results database (env GREENSPEC_DB).",
)
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
    from orchestrator.run.prepare import validate_spec
    from orchestrator.run.spec_paths import load_spec

    s = load_spec(spec)
    validate_spec(s)
    click.echo(s.summary())


def _run_options(obj: Context, wait: bool = False, drop_stale: bool = False, new_version: bool = False):
    from orchestrator.run.driver import RunOptions

    return RunOptions(db_url=obj.db, address=obj.address, wait=wait, drop_stale=drop_stale, new_version=new_version)


WAIT = click.option(
    "--wait", is_flag=True, help="If another driver runs this experiment, wait for it instead of refusing."
)
DROP_STALE = click.option(
    "--drop-stale", is_flag=True, help="Drop unfinished cells of an earlier version of the spec (refused otherwise)."
)

NEW_VERSION = click.option(
    "--new-version",
    is_flag=True,
    help="Continue an experiment whose name is bound to another spec file under this one (refused otherwise).",
)


def _print_report(report, db: str) -> None:
    """The run's counts; with failed cells, a last line naming how many and exit 1 (2 stays for refused input)."""
    c = report.counts
    click.echo(
        f"{report.experiment}: {c['done']} done, {c['failed']} failed, {c['pending']} pending "
        f"({report.added} new cells, {report.elapsed_s:.0f} s). Results in {db}."
    )
    if c["failed"]:
        click.echo(
            f"{c['failed']} cell{'s' if c['failed'] != 1 else ''} failed: `greenspec status` shows their errors; "
            "`greenspec retry --failed` runs them again."
        )
        sys.exit(1)
    if c["done"]:
        click.echo(next_commands(report.experiment, db))


def next_commands(experiment: str, db: str) -> str:
    """What to look at once cells are done, as commands to paste (`--db` where it is not the default)."""
    g = "greenspec" + (f" --db {shlex.quote(db)}" if db != DEFAULT_URL else "")
    e = shlex.quote(experiment)
    return "\n".join(
        [
            "Next:",
            f"  {g} findings -e {e}                  the verdicts on the paper's claims",
            f"  {g} export --validation -e {e}       the cost model's error, timed against replayed",
            f"  {g} report -e {e} --out {shlex.quote(experiment + '.html')}",
            f"  {g} dashboard",
        ]
    )


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@WAIT
@DROP_STALE
@NEW_VERSION
@click.pass_obj
def run(obj: Context, spec: str, wait: bool, drop_stale: bool, new_version: bool) -> None:
    """Run every cell of SPEC not already done (re-running adds only new cells).

    \b
    Example:
      greenspec --db sqlite:///runs.db run examples/demo.toml
    """
    from orchestrator.cli.progress import BarProgress
    from orchestrator.run.driver import run_spec_file

    show_model_training()
    with BarProgress() as bar:
        report = run_spec_file(spec, _run_options(obj, wait, drop_stale, new_version), bar)
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
    from orchestrator.cli.progress import BarProgress
    from orchestrator.run.driver import resume as do_resume

    show_model_training()
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
    from orchestrator.cli.progress import BarProgress
    from orchestrator.run.driver import resume as do_resume

    with BarProgress() as bar:
        report = do_resume(_run_options(obj, wait, drop_stale), experiment, bar, retry_failed=True)
    _print_report(report, obj.db)


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
    from orchestrator.cli.demo import DEMO_SPEC, run_demo

    if toy and spec_path:
        raise GreenspecError("--toy and --spec: give one (--toy is --spec examples/demo-toy.toml)")
    if toy:
        spec_path = str(DEMO_SPEC.with_name("demo-toy.toml"))

    run_demo(_run_options(obj), spec_path=spec_path, retrain=retrain, echo=click.echo)


for command in (*cli_results.COMMANDS, *cli_findings.COMMANDS, *cli_tools.COMMANDS):
    main.add_command(command)
main.add_command(cli_costs.costs)
