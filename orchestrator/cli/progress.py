"""The CLI's progress: a bar with done/total, failed, ETA and the strategy being run (rich) on a terminal; on
anything else (a log file, CI) a plain line every `LINE_EVERY_S` seconds and at the end, as tqdm and Ray Tune print.

Both count the cells by kind (training, reference, replay, timed, ...: `greenspec.status.kind_groups`)
and state, as `greenspec status` does, when the run tells them (`kinds`, from `storage.queries.status_counts`). The
ETA then weighs the cells left by their kind's measured cost in this run (`KindEta`: a replay costs milliseconds, a
timed cell seconds, a training minutes); a kind none of whose cells has finished takes the seconds the run predicts
for it (the timed cells: their replayed twins' predicted time), and the ETA says "estimating" while a kind with cells
left has neither; without the kinds it is the run's own overall rate (`eta_text`)."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from greenspec.status import kind_groups
from orchestrator.run.options import PREDICTED, left_text

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


ESTIMATING = "estimating"


class KindEta:
    """Each kind's measured cost per cell in this run, and the time left as the sum over kinds of cells left x cost.

    Every time cells finish (done or failed), the time since cells last finished is shared among the kinds that just
    finished, by count: the first training cell's minutes go to training, a replay batch's seconds to its replays, a
    timed cell's seconds (the worker's start too) to the timed cells. Cells done before this run began cost nothing
    here."""

    def __init__(self):
        self.cost: dict[str, list[float]] = {}  # kind -> [seconds, cells]
        self.predicted: dict[str, float] = {}  # kind -> seconds per cell, before any of its cells has finished
        self.finished: dict[str, int] | None = None
        self.last = 0.0

    def observe(self, groups: dict[str, dict[str, int]], now: float, predicted: dict[str, float] | None = None) -> None:
        """The cells by kind and state at `now` (`kind_groups`), and the run's predicted seconds per cell by kind."""
        self.predicted = dict(predicted or {})
        finished = {g: c["done"] + c["failed"] for g, c in groups.items()}
        if self.finished is None:
            self.finished, self.last = finished, now
            return
        new = {g: n - self.finished.get(g, 0) for g, n in finished.items() if n > self.finished.get(g, 0)}
        if new:
            share = (now - self.last) / sum(new.values())
            for g, n in new.items():
                seconds, cells = self.cost.setdefault(g, [0.0, 0])
                self.cost[g] = [seconds + share * n, cells + n]
            self.last = now
        self.finished = finished

    def per_cell(self, kind: str) -> float | None:
        """The kind's measured seconds per cell in this run, else the run's prediction for it, else None."""
        seconds, cells = self.cost.get(kind, (0.0, 0))
        return seconds / cells if cells else self.predicted.get(kind)

    def left_s(self, groups: dict[str, dict[str, int]]) -> float | None:
        """Seconds left: each kind's cells still pending or running at its cost per cell; None while a kind with
        cells left has no measured cost."""
        left = {g: c["pending"] + c["running"] for g, c in groups.items() if c["pending"] + c["running"]}
        costs = {g: self.per_cell(g) for g in left}
        if any(c is None for c in costs.values()):
            return None
        return sum(n * costs[g] for g, n in left.items())

    def text(self, groups: dict[str, dict[str, int]]) -> str:
        left = self.left_s(groups)
        return ESTIMATING if left is None else left_text(left)


def kinds_text(groups: dict[str, dict[str, int]]) -> str:
    """ "replay 800/11040, timed 0/60 (1 running)": each kind that has cells, finished of all, running and failed."""
    out = []
    for g, c in groups.items():
        total = sum(c.values())
        if not total:
            continue
        extra = ", ".join(f"{c[s]} {s}" for s in ("running", "failed") if c.get(s))
        out.append(f"{g} {c['done'] + c['failed']}/{total}" + (f" ({extra})" if extra else ""))
    return ", ".join(out)


class LineProgress:
    """Plain progress lines on `stream`: `cells 120/900 (13%), failed 0, 1m 05s, ETA 7m; plain`."""

    def __init__(self, stream=None, every_s: float = LINE_EVERY_S, clock=time.monotonic):
        self.stream, self.every_s, self.clock = stream or sys.stderr, every_s, clock
        self.total = self.done = self.failed = self.at_start = 0
        self.label = self.stage = ""
        self.t0 = self.last = 0.0
        self.groups: dict[str, dict[str, int]] | None = None
        self.eta = KindEta()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.total:
            self._line()

    def start(self, total: int, done: int, failed: int) -> None:
        self.total, self.done, self.failed, self.at_start = total, done, failed, done + failed
        self.t0 = self.last = self.clock()
        self._line()

    def kinds(self, counts: dict) -> None:
        """The cells by kind and state (`storage.queries.status_counts`), as the run goes."""
        self.groups = kind_groups(counts)
        self.eta.observe(self.groups, self.clock(), counts.get(PREDICTED))

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
        if self.groups is None:
            eta, kinds = eta_text(finished, self.total, elapsed, self.at_start), ""
        else:
            eta, kinds = self.eta.text(self.groups), f" [{kinds_text(self.groups)}]"
        said = ": ".join(x for x in (self.stage, self.label) if x)
        label = f"; {said}" if said else ""
        print(
            f"cells {finished}/{self.total} ({share:.0%}), failed {self.failed}, {elapsed:.0f}s, ETA {eta}{kinds}{label}",
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
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("{task.fields[kinds]}"),
            console=console,
            transient=False,
            refresh_per_second=4,
        )
        self._task = None
        self._eta, self._groups, self._clock = KindEta(), None, time.monotonic
        self._started = (0, 0, 0.0)  # total, finished at start, when: the overall rate where no kinds come

    def __enter__(self) -> BarProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def start(self, total: int, done: int, failed: int) -> None:
        self._started = (total, done + failed, self._clock())
        self._task = self._bar.add_task(
            "cells", total=total, completed=done, failed=failed, label="starting", eta="?", kinds=""
        )

    def kinds(self, counts: dict) -> None:
        self._groups = kind_groups(counts)
        self._eta.observe(self._groups, self._clock(), counts.get(PREDICTED))

    def update(self, done: int, failed: int, label: str, stage: str = "") -> None:
        if self._task is None:
            return
        total, at_start, t0 = self._started
        if self._groups is None:
            eta, kinds = eta_text(done + failed, total, self._clock() - t0, at_start), ""
        else:
            eta, kinds = self._eta.text(self._groups), kinds_text(self._groups)
        self._bar.update(self._task, completed=done + failed, failed=failed, label=label or stage, eta=eta, kinds=kinds)
