"""A training's work folder: the lock that keeps two trainings of the same file apart, and its leftovers.

A training of `<out>/<name>` keeps its intermediate files in `<out>/.work-<stem>/` (the token file and every
finished stage of the out-of-core build). Killed part-way, the next training of the same inputs resumes there;
unfinished (`.tmp`) files are deleted first and never used. Two trainings of the same file at once (two processes,
one work folder) do not mix: the second waits on the first's lock (`training_lock`), then trains.

Example:
    >>> with training_lock(Path("runs/ibases/plays-3f9c0a1b2d4e.igtree")):
    ...     work = work_folder(Path("runs/ibases/plays-3f9c0a1b2d4e.igtree"))
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)


def work_folder(path: Path) -> Path:
    """The folder of a training of `path`'s intermediate files, beside it: `.work-<stem>`."""
    return path.parent / f".work-{path.stem}"


@contextmanager
def training_lock(path: Path, poll_s: float = 1.0) -> Iterator[None]:
    """Hold the exclusive right to train `path` (its work folder and file) while inside; another training of
    the same file, in any process, waits here (logging who holds it) until the holder finishes or dies.

    The lock is an flock on `.<file>.lock` beside the file, released by the kernel if the holder is killed; the
    holder deletes it when done, so a waiter checks that the file it locked is still the one in place.
    """
    lock = path.parent / f".{path.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = _acquire(lock, path.name, poll_s)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}".encode(), 0)
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)


def _acquire(lock: Path, name: str, poll_s: float) -> int:
    """An open descriptor of `lock` holding its flock, once no one else holds it (the file still in place)."""
    told = False
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not told:
                holder = os.pread(fd, 300, 0).decode(errors="replace").strip() or "another process"
                logger.warning("%s is being trained by %s: waiting for it to finish", name, holder)
                told = True
            os.close(fd)
            time.sleep(poll_s)
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder finished and removed the file we locked: lock the current one


def remove_tmp(work: Path) -> None:
    """Delete the unfinished (.tmp) files a killed training left: they are never used."""
    for f in work.rglob("*"):
        if f.is_file() and (f.name.endswith(".tmp") or ".tmp." in f.name):
            f.unlink()
