"""`greenspec status`, `export` and `dashboard`: the commands that read results (registered on `cli.main`).

Each command imports its library when it runs (pandas, the queries, the dashboard): every `greenspec` call imports
this module and should start in about 2 s."""

from __future__ import annotations

import json
import sys

import click

from orchestrator.cli.common import FORCE, FORMATS, Context, check_out, output_format
from workers.errors import GreenspecError


def _reader(db: str):
    """A read-only session factory; None when the database has no greenspec schema yet."""
    from storage.db import open_reader

    return open_reader(db)


COSTS = click.option(
    "--costs",
    "costs_table",
    default=None,
    help="Re-predict the experiment's replayed generations with this stored cost table (id or name) and show those.",
)


def _repredicted(obj: Context, experiment: str | None, costs_table: str | None) -> str | None:
    """With --costs: the experiment re-predicted with that table (`greenspec costs repredict`), by name."""
    if costs_table is None:
        return experiment
    from greenspec.repredict import repredict

    done = repredict(obj.db, experiment, costs_table)
    click.echo(f"{done.name}: {done.label}; its timed generations are not shown", err=True)
    return done.name


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable counts.")
@click.option("--experiment", "-e", default=None, help="Only this experiment.")
@click.pass_obj
def status(obj: Context, as_json: bool, experiment: str | None) -> None:
    """Cell counts by state, and failures with their errors.

    \b
    Example:
      greenspec status --json
    """
    from greenspec.report import notes_and_tags
    from greenspec.status import empty_counts, kind_groups, status_lines
    from storage import queries

    _refuse_missing_file(obj.db, experiment)
    Session = _reader(obj.db)
    if Session is None and experiment:
        raise GreenspecError(f"no experiment {experiment!r} in {obj.db}")
    if Session is None:
        counts = {**empty_counts(), "kinds": kind_groups(empty_counts()), "experiments": {}}
        click.echo(json.dumps(counts) if as_json else "no experiments yet")
        return
    with Session() as s:
        names = _experiment_names(s, experiment, obj.db)
        counts = queries.status_counts(s, experiment)
        per = {n: queries.status_counts(s, n) for n in ([experiment] if experiment else names)}
        fails = {n: queries.failures_frame(s, queries.experiment_id(s, n)) for n in per}
        about = {n: notes_and_tags(queries.experiment_info(s, queries.experiment_id(s, n))["spec_toml"]) for n in per}
    if as_json:
        per = {n: {**c, "kinds": kind_groups(c), "notes": about[n][0], "tags": about[n][1]} for n, c in per.items()}
        click.echo(json.dumps({**counts, "kinds": kind_groups(counts), "experiments": per}))
        return
    if not per:
        click.echo("no experiments yet")
    for name, c in per.items():
        failures = [] if fails[name] is None else [_failure_line(r) for r in fails[name].itertuples()]
        click.echo("\n".join(status_lines(name, c, failures, *about[name])))


def _refuse_missing_file(db: str, experiment: str | None) -> None:
    """A SQLite file that does not exist is a mistyped --db (or no run yet), not an empty database: one line."""
    from pathlib import Path

    from storage.db import slash_hint, sqlite_path

    path = sqlite_path(db)
    if path is None or path.exists() or not path.parent.is_dir():  # a missing folder: the engine's own line
        return
    hint = slash_hint(db, path) if Path("/", path).exists() else ""
    so = f", so no experiment {experiment!r}" if experiment else ""
    raise GreenspecError(f"no database at {path} (--db {db}){so}; `greenspec run SPEC` creates it{hint}")


def _experiment_names(s, experiment: str | None, db: str) -> list[str]:
    """The stored experiments' names; refuses an `--experiment` that is not among them."""
    from storage import queries

    names = list(queries.experiments_frame(s)["name"])
    if experiment and experiment not in names:
        raise GreenspecError(f"no experiment {experiment!r} in {db} (known: {', '.join(names) or 'none'})")
    return names


def _failure_line(r) -> str:
    """A failed cell in one line: its kind and the coordinates it has (no `nan` for the ones it has not)."""

    def given(v) -> bool:
        return v is not None and v == v and v != ""  # v != v: NaN, as pandas fills a missing number

    parts = [r.kind, *(str(v) for v in (r.strategy, r.corpus, r.task) if given(v))]
    if given(r.prompt):
        parts.append(f"prompt {int(r.prompt)}")
    if given(r.k) and (r.kind == "sweep" or int(r.k)):
        parts.append(f"k={int(r.k)}")
    if given(r.regime):
        parts.append(str(r.regime))
    error = str(r.error).splitlines()[0] if given(r.error) and str(r.error).strip() else ""
    return f"{' '.join(parts)}: {error}"


@click.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Default: the one --out's extension names (.csv .parquet .md .tex), else csv.",
)
@click.option("--out", "out", type=click.Path(dir_okay=False), default="-", help="Output file (default: stdout).")
@click.option("--experiment", "-e", default=None, help="Experiment name (default: the newest).")
@click.option(
    "--compare",
    "compare_with",
    default=None,
    help="Instead: `paper` (the run's numbers beside the seed paper's) or another experiment's name (the cells both "
    "ran, side by side), cell by cell, with differences.",
)
@click.option("--pooled", is_flag=True, help="Ratios of sums over each cell instead of the paper's per-prompt means.")
@click.option(
    "--map",
    "map_file",
    type=click.Path(dir_okay=False),
    default=None,
    help='With --compare paper: a TOML file pairing names, [tasks] mine = "wikitext", [strategies] mine = "...".',
)
@click.option(
    "--generations",
    is_flag=True,
    help="Instead: one row per generation (timed and replayed), from which every interval can be recomputed.",
)
@click.option(
    "--validation",
    is_flag=True,
    help="Instead: the cost model's validation per regime and width band (pairs, error, bias, noise, Spearman).",
)
@click.option(
    "--timed-in",
    default=None,
    help="With --validation: the replayed cells checked against the generations timed in this experiment (the same "
    "prompts run on the device a --costs table was measured on).",
)
@click.option(
    "--all-versions", is_flag=True, help="Also the rows of an earlier version of the spec, marked version = older."
)
@COSTS
@FORCE
@click.pass_obj
def export(  # wide: click passes each of the command's options as one parameter
    obj: Context,
    fmt: str | None,
    out: str,
    experiment: str | None,
    compare_with: str | None,
    pooled: bool,
    map_file: str | None,
    generations: bool,
    validation: bool,
    timed_in: str | None,
    all_versions: bool,
    costs_table: str | None,
    force: bool,
) -> None:
    """One row per strategy x task x k x regime x measure with speed, acceptance, quality and energy, each figure with
    its 95% interval over prompts.

    \b
    Example:
      greenspec export --format latex --out table.tex
      greenspec export --compare paper --format markdown --map names.toml
      greenspec export --experiment demo --compare demo@laptop --format markdown
      greenspec export --generations --out generations.csv
      greenspec export --validation --format markdown
      greenspec export --costs 1 --format markdown
      greenspec export -e demo --costs 1 --validation --timed-in demo-1t
    """
    from greenspec.frames import write_summary

    fmt = output_format(fmt, out)
    _refuse_combinations(map_file, compare_with, pooled, generations, validation, costs_table, timed_in)
    check_out(obj, out, force)
    experiment = _repredicted(obj, experiment, costs_table)
    Session = _reader(obj.db)
    if Session is None:
        raise GreenspecError(f"{obj.db}: no results yet; start with `greenspec demo` or `greenspec run SPEC`")
    with Session() as s:
        _experiment_names(s, experiment, obj.db)
        if compare_with == "paper":
            from orchestrator.cli.paper_compare import write_comparison

            click.echo(write_comparison(s, experiment, fmt, out, map_file).describe(), err=True)
            return
        if compare_with:
            from greenspec.frames import write_comparison_of_experiments

            _experiment_names(s, compare_with, obj.db)
            done = write_comparison_of_experiments(s, experiment, compare_with, fmt, out)
            only = f"{done.attrs['only_a']} cells of the first only, {done.attrs['only_b']} of {compare_with} only"
            click.echo(f"export: {len(done)} cells both ran; {only}", err=True)
            return
        if validation:
            from greenspec.frames import write_validation

            _experiment_names(s, timed_in, obj.db)  # refuses an unknown --timed-in (None checks nothing)
            write_validation(s, experiment, fmt, out, timed_in)
            return
        counts = write_summary(s, experiment, fmt, out, pooled, all_versions, generations)
        _say_superseded(s, experiment, all_versions, counts)


def _refuse_combinations(
    map_file, compare_with, pooled: bool, generations: bool, validation: bool, costs_table, timed_in=None
) -> None:
    """export's options that do not go together, refused in one line."""
    if timed_in and not validation:
        raise GreenspecError("--timed-in names the run a validation is checked against; add --validation")
    if map_file and compare_with != "paper":
        raise GreenspecError("--map pairs names for --compare paper; add --compare paper")
    if generations and (pooled or compare_with):
        raise GreenspecError(
            f"--generations writes one row per generation: --{'pooled' if pooled else 'compare'} does not apply"
        )
    given = {"generations": generations, "pooled": pooled, "compare": compare_with}
    given["costs"] = costs_table and not timed_in  # a re-predicted experiment is validated against another run
    if validation and (other := next((name for name, on in given.items() if on), None)):
        raise GreenspecError(f"--validation writes the cost model's validation table: --{other} does not apply")


def _say_superseded(session, experiment: str | None, all_versions: bool, counts: dict | None = None) -> None:
    """One line on stderr for each thing the export left out: generations superseded by a newer one of the same
    coordinate, version and prompt, and (without --all-versions) rows of an earlier version of the spec (`counts`:
    what the summary export counted, `greenspec.frames.write_summary`; else counted here)."""
    from greenspec.frames import versions
    from storage.queries import experiment_id
    from storage.summary import older_cells, superseded

    exp_id = experiment_id(session, experiment)
    if exp_id is None:
        return
    v = versions(session, exp_id)
    if n := superseded(session, exp_id, v, None if counts is None else counts["counted"]):
        click.echo(
            f"export: {n} generations left out: each cell coordinate, version and prompt shows its newest generation",
            err=True,
        )
    if not all_versions and (n := older_cells(session, exp_id, v) if counts is None else counts["hidden_rows"]):
        click.echo(f"export: {n} rows of an earlier version of the spec left out (--all-versions shows them)", err=True)


@click.command()
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
        raise GreenspecError(
            f"--port {port}: 127.0.0.1:{port} is already in use (another dashboard?); pick another port"
        )
    click.echo(f"dashboard: http://127.0.0.1:{port}  (database {obj.db}; Ctrl-C stops)")
    sys.exit(launch(obj.db, port))


@click.command()
@click.option("--out", "out", type=click.Path(dir_okay=False), default="report.html", show_default=True)
@click.option("--experiment", "-e", default=None, help="Experiment name (default: the newest).")
@COSTS
@FORCE
@click.pass_obj
def report(obj: Context, out: str, experiment: str | None, costs_table: str | None, force: bool) -> None:
    """Write one experiment's results as a self-contained HTML file, to share.

    Example: greenspec report --experiment demo --out demo.html
    """
    import greenspec  # deferred: matplotlib and the export's frames

    check_out(obj, out, force)
    experiment = _repredicted(obj, experiment, costs_table)
    results = greenspec.open_results(obj.db)
    with results.Session() as s:
        _experiment_names(s, experiment, obj.db)
    path = results.report(experiment, out, force=True)  # --out was checked above, with the database's own path
    click.echo(f"report: {path}", err=True)


COMMANDS = (status, export, report, dashboard)
