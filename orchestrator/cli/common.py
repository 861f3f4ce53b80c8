"""What the CLI's command modules share: the context object and the `--out`/`--force` checks."""

from __future__ import annotations

from pathlib import Path

import click

from greenspec.outputs import check_out_path
from storage.db import sqlite_path
from workers.errors import GreenspecError


class Context:
    def __init__(self, db: str, address: str | None, debug: bool):
        self.db, self.address, self.debug = db, address, debug


FORMATS = ("csv", "parquet", "markdown", "latex")  # `greenspec export --format`
SUFFIX_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".md": "markdown", ".tex": "latex"}

FORCE = click.option("--force", is_flag=True, help="Replace --out if the file exists (never a database).")


def check_out(obj: Context, out: str | None, force: bool) -> None:
    """Refuse an --out that is a database or an existing file (without --force), before any work."""
    if out is not None and out != "-":
        check_out_path(out, "--out", force, sqlite_path(obj.db))


def output_format(fmt: str | None, out: str) -> str:
    """The export format: `fmt`, else the one --out's extension names, else csv. A `fmt` that contradicts a known
    extension (CSV into r.parquet) is refused in one line."""
    named = SUFFIX_FORMATS.get(Path(out).suffix.lower()) if out != "-" else None
    if fmt is not None and named is not None and fmt != named:
        raise GreenspecError(
            f"--format {fmt} --out {out}: the extension says {named}; give --out a .{_suffix(fmt)} name or "
            f"--format {named} (without --format the extension decides)"
        )
    return fmt or named or "csv"


def _suffix(fmt: str) -> str:
    return next(s for s, f in SUFFIX_FORMATS.items() if f == fmt).lstrip(".")
