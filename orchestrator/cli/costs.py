"""`greenspec costs measure | list | import | export | repredict`: round-cost tables as portable artifacts.

A table measured on one machine (`measure`, in about a minute for SmolLM2 on 2 cores) is exported as a JSON file,
imported into another database and used there to re-predict an experiment's replayed generations for the machine
it was measured on (`repredict`, or `greenspec export --costs` / `report --costs`). Every command imports its
library when it runs (torch only for `measure`).

Example:
    greenspec costs measure --verifier smollm2-135m --threads 1 --out cpu-1t.json
    greenspec costs import cpu-1t.json && greenspec costs list
    greenspec costs repredict --experiment demo --costs smollm2-135m-cpu-1t-float32
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from greenspec.outputs import write_failed
from orchestrator.cli.common import FORCE, Context, check_out
from workers.errors import GreenspecError


@click.group()
def costs() -> None:
    """Round-cost tables: measure one on this machine, list, import, export, re-predict an experiment with one.

    \b
    Example:
      greenspec costs measure --verifier smollm2-135m --threads 1 --out cpu-1t.json
      greenspec costs repredict --experiment demo --costs 1
    """


def _sizes(text: str) -> tuple[int, ...]:
    """--trees "4,8,16" (or "" for none) as sizes, each a positive integer."""
    try:
        sizes = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError as err:
        raise GreenspecError(f"--trees {text!r}: give tree sizes as integers, e.g. 4,8,16 ('' for none)") from err
    if any(n < 1 for n in sizes):
        raise GreenspecError(f"--trees {text!r}: every tree size is at least 1")
    return sizes


def _contexts(text: str) -> tuple[int, int]:
    """--contexts "32-160" as (lo, hi), 2 <= lo <= hi."""
    lo, sep, hi = text.partition("-")
    if not (sep and lo.strip().isdigit() and hi.strip().isdigit()) or not 2 <= int(lo) <= int(hi):
        raise GreenspecError(f"--contexts {text!r}: give LO-HI tokens, 2 <= LO <= HI (e.g. 32-160)")
    return int(lo), int(hi)


def _stored_references(db: str, experiment: str) -> list:
    """An experiment's first stored references, for the table's reference check."""
    from storage.cost_tables import stored_references
    from storage.db import open_reader
    from storage.queries import experiment_id
    from workers.portable_tables import REFERENCES

    Session, refs = open_reader(db), []
    if Session is not None:
        with Session() as s:
            exp_id = experiment_id(s, experiment)
            refs = stored_references(s, exp_id, REFERENCES) if exp_id is not None else []
    if not refs:
        raise GreenspecError(f"--experiment {experiment!r}: no stored references in {db} to check the table against")
    return refs


def _store(db: str, table, name: str | None, samples) -> str:
    """Store a table in `db` (created or migrated as a run would); the line saying where."""
    from storage.cost_tables import store_table
    from storage.db import guard, open_db

    _, Session = open_db(db)
    with guard(db, "storing the cost table"), Session() as s:
        row, new = store_table(s, table, name, samples)
        s.commit()
        return f"{'stored as' if new else 'already stored as'} cost table {row.id} ({row.name}) in {db}"


def _write(text: str, out: str) -> None:
    if out == "-":
        click.echo(text, nl=False)
        return
    try:
        Path(out).write_text(text)
    except OSError as err:
        raise write_failed(out, "--out", err) from err


def summary(table, seconds: float) -> str:
    """What a measured table says in a few lines: device, rows, noise, energy, reference check, time taken."""
    m = table.meta
    noise = ", ".join(f"{r} {v:.1%}" for r, v in sorted(table.noise.items())) or "not measured (one repeat)"
    agreement = m.get("agreement")
    check = "not run" if agreement is None else f"{agreement:.1%} of {m.get('agreement_positions')} positions agree"
    joules = f", {m['joules_per_round']:.3g} J a round" if m.get("joules_per_round") else ""
    return "\n".join(
        [
            f"{m.get('model', table.verifier)} on {table.device} ({m.get('device_name')}), {m.get('dtype')}, "
            f"{m.get('threads')} threads; {m.get('cores')} cores, {m.get('memory_gb')} GB",
            f"{len(table.rows)} rows; noise of its repeats (median |t / median - 1|): {noise}",
            f"energy {m.get('energy')} ({m.get('power_source')}, {m.get('mean_power_w', 0):.1f} W){joules}",
            f"reference check: {check}",
            f"measured in {seconds:.0f} s",
        ]
    )


@costs.command()
@click.option("--verifier", required=True, help="A built-in name (smollm2-135m), a local folder or a hub id.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:N or mps.")
@click.option(
    "--dtype", default="auto", show_default=True, type=click.Choice(["auto", "float32", "float16", "bfloat16"])
)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Torch threads (default: every core).")
@click.option("--max-k", default=8, show_default=True, type=click.IntRange(1, 64), help="Widest chain drafted.")
@click.option("--trees", default="5", show_default=True, help="Token-tree sizes, comma-separated ('' for none).")
@click.option("--contexts", default="32-160", show_default=True, help="LO-HI context tokens the rounds see.")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1, 20), help="Timed rounds per width.")
@click.option("--budget-s", default=75.0, show_default=True, type=click.FloatRange(min=1), help="No repeat past it.")
@click.option(
    "--experiment", "-e", default=None, help="Check this experiment's stored references (default: made here)."
)
@click.option("--name", default=None, help="The table's name (default: model-device-threads-dtype).")
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Write the table as JSON ('-': stdout).")
@click.option("--db", "store_db", default=None, help="Store it in this database (default: only --out; neither: --db).")
@FORCE
@click.pass_obj
def measure(obj: Context, **opts) -> None:
    """Measure the verifier's round-cost table on this machine, with its noise and a reference check.

    \b
    Example:
      greenspec costs measure --verifier smollm2-135m --threads 1 --out cpu-1t.json
    """
    from workers.portable_tables import MeasureRequest, default_name, measure_table, table_file

    req = MeasureRequest(
        opts["verifier"],
        opts["device"],
        opts["dtype"],
        opts["threads"],
        opts["max_k"],
        _sizes(opts["trees"]),
        _contexts(opts["contexts"]),
        opts["repeats"],
        opts["budget_s"],
    )
    out, db = opts["out"], opts["store_db"] or (None if opts["out"] else obj.db)
    check_out(obj, out, opts["force"])
    refs = _stored_references(opts["store_db"] or obj.db, opts["experiment"]) if opts["experiment"] else []
    t0 = time.perf_counter()
    table, samples = measure_table(req, refs)
    click.echo(summary(table, time.perf_counter() - t0), err=True)
    if out:
        _write(table_file(table, opts["name"] or default_name(table), samples), out)
    if db:
        click.echo(_store(db, table, opts["name"], samples), err=True)


@costs.command(name="list")
@click.pass_obj
def list_tables(obj: Context) -> None:
    """The stored cost tables: id, name, verifier, device, dtype, threads, reference agreement, energy, noise.

    \b
    Example:
      greenspec costs list
    """
    from tabulate import tabulate

    from storage.cost_tables import tables_frame
    from storage.db import open_reader

    Session = open_reader(obj.db)
    df = None
    if Session is not None:
        with Session() as s:
            df = tables_frame(s)
    if df is None or df.empty:
        click.echo("no cost tables yet (`greenspec costs measure` or `costs import FILE` stores one)")
        return
    df["created_at"] = [str(t)[:19] for t in df["created_at"]]
    click.echo(tabulate(df, headers="keys", showindex=False, floatfmt=".3g"))


@costs.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--name", default=None, help="Store it under this name (default: the file's, else a new one).")
@click.pass_obj
def import_table(obj: Context, file: str, name: str | None) -> None:
    """Store a cost table from a file (`greenspec costs export` or `measure --out` wrote it).

    \b
    Example:
      greenspec costs import cpu-1t.json
    """
    from workers.portable_tables import read_table_file

    try:
        text = Path(file).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise GreenspecError(f"{file}: cannot read the cost table ({getattr(err, 'strerror', None) or err})") from err
    table, named, samples = read_table_file(text, file)
    click.echo(_store(obj.db, table, name or named, samples))


@costs.command(name="export")
@click.argument("table")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The JSON file ('-': stdout).")
@FORCE
@click.pass_obj
def export_table(obj: Context, table: str, out: str, force: bool) -> None:
    """Write a stored cost table (by id or name) as a JSON file, to import elsewhere.

    \b
    Example:
      greenspec costs export 1 --out cpu-1t.json
    """
    from storage.cost_tables import find_table, known_tables, row_samples, row_table
    from storage.db import open_reader
    from workers.portable_tables import table_file

    check_out(obj, out, force)
    Session = open_reader(obj.db)
    if Session is None:
        raise GreenspecError(f"no cost table {table!r}: {obj.db} holds no results yet")
    with Session() as s:
        row = find_table(s, table)
        if row is None:
            raise GreenspecError(f"no cost table {table!r} in {obj.db} (known: {known_tables(s)})")
        text = table_file(row_table(row), row.name, row_samples(row))
    _write(text, out)


@costs.command()
@click.option("--experiment", "-e", default=None, help="The replayed experiment (default: the newest).")
@click.option("--costs", "table", required=True, help="The stored cost table, by id or name.")
@click.pass_obj
def repredict(obj: Context, experiment: str | None, table: str) -> None:
    """Re-predict an experiment's replayed generations for the device a stored table was measured on, as a derived
    experiment `<experiment>@<table>` (timed generations are not copied).

    \b
    Example:
      greenspec costs repredict --experiment demo --costs 1
    """
    from greenspec.repredict import repredict as do_repredict

    done = do_repredict(obj.db, experiment, table)
    how = "reused" if done.reused else "written"
    click.echo(
        f"{done.name}: {done.generations:,} replayed generations of {done.source!r} {done.label} ({how}); "
        f"its {done.timed_left:,} timed generations are not copied"
    )


COMMANDS = (costs,)
