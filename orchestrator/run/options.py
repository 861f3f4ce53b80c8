"""What a run is told (`RunOptions`), what it reports as it goes (`Progress`), and how an interrupted one ends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from storage.db import Session
from workers.errors import GreenspecError

Sessions = Callable[[], Session]  # a run's session factory (`storage.db.open_db`'s sessionmaker)


def left_text(seconds: float) -> str:
    """A time left as a progress line shows it: whole minutes from 90 s ("7m"), else seconds ("45s")."""
    return f"{seconds / 60:.0f}m" if seconds >= 90 else f"{seconds:.0f}s"


PREDICTED = "predicted_s"  # in the counts a progress is told: {kind: seconds per cell} predicted before any has run


class Progress(Protocol):
    """What the driver reports as it goes (the CLI draws it as a bar)."""

    def start(self, total: int, done: int, failed: int) -> None: ...
    def update(self, done: int, failed: int, label: str, stage: str = "") -> None: ...


class NoProgress:
    def start(self, total: int, done: int, failed: int) -> None: ...
    def update(self, done: int, failed: int, label: str, stage: str = "") -> None: ...


class Interrupted(GreenspecError):
    """Ctrl-C: running cells were put back to pending."""


@dataclass(frozen=True)
class RunOptions:
    """How to run: where to store, which Ray, and test/benchmark seams."""

    db_url: str = "sqlite:///greenspec.db"
    address: str | None = None
    num_cpus: int | None = None
    worker_env: dict[str, str] = field(default_factory=dict)  # env vars of the accelerator worker (fault tests)
    worker_cls: Any = None  # a Ray actor class replacing AcceleratorWorker
    wait: bool = False  # wait for another driver's lease instead of refusing
    lease_s: float | None = None  # lease expiry (default: GREENSPEC_LEASE_S or 30 s)
    drop_stale: bool = False  # drop unfinished cells of an earlier spec version
    new_version: bool = False  # continue an experiment bound to another spec file under this one
