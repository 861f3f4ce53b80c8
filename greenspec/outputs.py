"""Where a command writes its file (`export --out`, `train --out`, `latency --out`): checked before any work.

A path that is a SQLite database (by its header, or the `--db` file itself) is refused; so is an existing
regular file unless `--force`, a folder, a missing or read-only folder. Devices (`/dev/stdout`, `/dev/null`)
are accepted as they are; a write that fails on them (`/dev/full`) is one line (`write_failed`).

Example:
    >>> check_out_path("greenspec.db", "--out", force=False)
    Traceback (most recent call last):
    OutputError: --out greenspec.db: that file is a SQLite database; write somewhere else
"""

from __future__ import annotations

import os
from pathlib import Path

from workers.errors import GreenspecError

SQLITE_HEADER = b"SQLite format 3\x00"


class OutputError(GreenspecError):
    """An output path that would overwrite something unnoticed, or cannot be written."""


def is_sqlite_file(path: Path) -> bool:
    """Whether `path` is a regular file that starts with SQLite's header."""
    try:
        with open(path, "rb") as fh:
            return path.is_file() and fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def check_out_path(out: str, option: str, force: bool, db_file: Path | None = None) -> None:
    """Refuse, in one line, an output path that is a database, an existing file (without `force`), a folder, or
    sits in a folder that is missing or not writable."""
    path = Path(out)
    where = f"{option} {out}"
    if path.is_dir():
        raise OutputError(f"{where}: is a folder; give a file name")
    if is_sqlite_file(path) or (db_file is not None and _same_file(path, db_file)):
        raise OutputError(f"{where}: that file is a SQLite database; write somewhere else")
    folder = path.resolve().parent
    if not folder.is_dir():
        raise OutputError(f"{where}: folder {folder} does not exist")
    if path.is_file() and not force:
        raise OutputError(f"{where}: the file exists; pass --force to replace it")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"{where}: the file is not writable")
    if not path.exists() and not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: folder {folder} is not writable")


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (also when it does not exist yet)."""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def write_failed(out: str, option: str, err: OSError) -> OutputError:
    """The one line for a write that failed part-way (a full disk or device)."""
    return OutputError(f"{option} {out}: cannot write ({err.strerror or err})")
