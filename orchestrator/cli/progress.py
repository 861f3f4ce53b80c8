"""The CLI's progress: a bar with done/total, failed, ETA and the strategy being run (rich) on a terminal; on
anything else (a log file, CI) a plain line every `LINE_EVERY_S` seconds and at the end, as tqdm and Ray Tune print."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from orchestrator.run.options import left_text

LINE_EVERY_S = 30.0
ETA_AFTER = 0.01  # the share of the run's cells done before its rate predicts the rest


def eta_text(done: int, total: int, elapsed_s: float, done_at_start: int = 0) -> str:
    """The remaining time at this run's own rate: "?" until `ETA_AFTER` of the cells it had left are done (the first
    few are the training and reference cells, minutes each, of a grid whose replays take milliseconds)."""
    new = done - done_at_start
    if done >= total:
        return "0s"
    if new <= 0 or new < ETA_AFTER * (total - done_at_start):
        return "?"
    return left_text((total - done) * elapsed_s / new)


class LineProgress:
    """Plain progress lines on `stream`: `cells 120/900 (13%), failed 0, 1m 05s, ETA 7m; plain`."""

    def __init__(self, stream=None, every_s: float = LINE_EVERY_S, clock=time.monotonic):
        self.stream, self.every_s, self.clock = stream or sys.stderr, every_s, clock
        self.total = self.done = self.failed = self.at_start = 0
        self.label = self.stage = ""
        self.t0 = self.last = 0.0

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.total:
            self._line()

    def start(self, total: int, done: int, failed: int) -> None:
        self.total, self.done, self.failed, self.at_start = total, done, failed, done + failed
        self.t0 = self.last = self.clock()
        self._line()

    def update(self, done: int, failed: int, label: str, stage: str = "") -> None:
        """A line every `every_s` seconds, and at once when the run moves to another stage (training, references,
        the cost model, replays, timed cells)."""
        self.done, self.failed, self.label = done, failed, label or ""
        moved, self.stage = bool(stage) and stage != self.stage, stage or self.stage
        if moved or self.clock() - self.last >= self.every_s:
            self._line()

    def _line(self) -> None:
        self.last = self.clock()
        elapsed = self.last - self.t0
        finished = self.done + self.failed
        share = finished / self.total if self.total else 1.0
        eta = eta_text(finished, self.total, elapsed, self.at_start)
        said = ": ".join(x for x in (self.stage, self.label) if x)
        label = f"; {said}" if said else ""
        print(
            f"cells {finished}/{self.total} ({share:.0%}), failed {self.failed}, {elapsed:.0f}s, ETA {eta}{label}",
            file=self.stream,
            flush=True,
        )


class BarProgress:
    """A `orchestrator.run.options.Progress` drawn on stderr as a bar; plain lines (`LineProgress`) when stderr is not a
    terminal."""

    def __new__(cls, *args, **kwargs):
        if cls is BarProgress and not sys.stderr.isatty():
            return LineProgress()
        return super().__new__(cls)

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

    def update(self, done: int, failed: int, label: str, stage: str = "") -> None:
        if self._task is not None:
            self._bar.update(self._task, completed=done + failed, failed=failed, label=label or stage)
