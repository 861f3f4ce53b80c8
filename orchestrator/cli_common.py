"""What the CLI's command modules share: the context object and the `--out`/`--force` checks."""

from __future__ import annotations

import click


class Context:
    def __init__(self, db: str, address: str | None, debug: bool):
        self.db, self.address, self.debug = db, address, debug


FORCE = click.option("--force", is_flag=True, help="Replace --out if the file exists (never a database).")


def check_out(obj: Context, out: str | None, force: bool) -> None:
    """Refuse an --out that is a database or an existing file (without --force), before any work."""
    from orchestrator.outputs import check_out_path
    from storage.db import sqlite_path

    if out is not None and out != "-":
        check_out_path(out, "--out", force, sqlite_path(obj.db))
