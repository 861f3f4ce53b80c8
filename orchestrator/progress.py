"""The CLI's progress bar: done/total, failed, ETA and the strategy being run (rich)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class BarProgress:
    """A `orchestrator.options.Progress` drawn on stderr; plain lines when stderr is not a terminal."""

    def __init__(self):
        console = Console(file=sys.stderr)
        self._bar = Progress(
            TextColumn("[bold]{task.fields[label]:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            refresh_per_second=4,
        )
        self._task = None

    def __enter__(self) -> BarProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def start(self, total: int, done: int, failed: int) -> None:
        self._task = self._bar.add_task("cells", total=total, completed=done, failed=failed, label="starting")

    def update(self, done: int, failed: int, label: str) -> None:
        if self._task is not None:
            self._bar.update(self._task, completed=done + failed, failed=failed, label=label or "")
