"""`greenspec findings`: the paper's claims and the future-work, tree and auto-k targets one experiment's grid can
answer, each with its verdict, and those it cannot, with the reason (`greenspec.findings`; registered on
`cli.main`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.cli.common import FORCE, Context, check_out
from workers.errors import GreenspecError

FINDINGS_FORMATS = ("markdown", "csv", "json")
SUFFIXES = {".md": "markdown", ".csv": "csv", ".json": "json"}


@click.command()
@click.option("--experiment", "-e", default=None, help="Experiment name (default: the newest).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FINDINGS_FORMATS),
    default=None,
    help="Default: the one --out's extension names (.md .csv .json), else markdown.",
)
@click.option("--out", "out", type=click.Path(dir_okay=False), default="-", help="Output file (default: stdout).")
@FORCE
@click.pass_obj
def findings(obj: Context, experiment: str | None, fmt: str | None, out: str, force: bool) -> None:
    """The seed paper's claims and the future-work, tree and auto-k targets this experiment can answer, each with
    its verdict (holds, does not hold, tie, inconclusive), estimate, 95% interval, prompts and family; the ones it
    cannot answer, with the reason.

    \b
    Example:
      greenspec findings --experiment demo
      greenspec findings --format csv --out findings.csv
    """
    from greenspec.findings import findings_text, read_findings, tally
    from orchestrator.cli.results import _experiment_names, _reader, _refuse_missing_file

    named = SUFFIXES.get(Path(out).suffix.lower()) if out != "-" else None
    if fmt and named and fmt != named:
        raise GreenspecError(f"--format {fmt} --out {out}: the extension says {named}; give one or make them agree")
    fmt = fmt or named or "markdown"
    check_out(obj, out, force)
    _refuse_missing_file(obj.db, experiment)
    Session = _reader(obj.db)
    if Session is None:
        raise GreenspecError(f"{obj.db}: no results yet; start with `greenspec demo` or `greenspec run SPEC`")
    with Session() as s:
        _experiment_names(s, experiment, obj.db)
        frame = read_findings(s, experiment)
    text = findings_text(frame, fmt)
    if out == "-":
        sys.stdout.write(text)
        return
    Path(out).write_text(text, encoding="utf-8")
    click.echo(f"findings: {tally(frame)}; written to {out}", err=True)


COMMANDS = (findings,)
