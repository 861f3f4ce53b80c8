"""Progress on a non-terminal: plain lines with counts, failures and ETA every so often and at the end."""

from __future__ import annotations

import io

from orchestrator.cli.progress import BarProgress, LineProgress, eta_text


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_lines_every_interval_and_at_the_end():
    out, clock = io.StringIO(), Clock()
    with LineProgress(out, every_s=30, clock=clock) as p:
        p.start(total=100, done=10, failed=0)  # a resumed run: 10 done before it
        clock.t += 10
        p.update(20, 0, "ngram")  # 10 s later: no line yet
        clock.t += 25
        p.update(40, 1, "olifant (replay)")  # 35 s in: a line; 31 cells in 35 s, 59 left -> ~67 s
    lines = out.getvalue().splitlines()
    assert lines[0] == "cells 10/100 (10%), failed 0, 0s, ETA ?"
    assert lines[1] == "cells 41/100 (41%), failed 1, 35s, ETA 67s; olifant (replay)"
    assert len(lines) == 3 and lines[2] == lines[1]  # the closing line repeats the final counts


def test_a_line_at_once_when_the_run_moves_to_another_stage():
    out, clock = io.StringIO(), Clock()
    with LineProgress(out, every_s=30, clock=clock) as p:
        p.start(total=50, done=0, failed=0)
        clock.t += 2
        p.update(0, 0, "pydoc", "training")  # a new stage: a line now, not in 30 s
        clock.t += 3
        p.update(1, 0, "pydoc", "training")  # the same stage: none
        clock.t += 3
        p.update(3, 0, "plain", "references")
    lines = out.getvalue().splitlines()
    assert lines[1:3] == [
        "cells 0/50 (0%), failed 0, 2s, ETA ?; training: pydoc",
        "cells 3/50 (6%), failed 0, 8s, ETA 2m; references: plain",
    ]
    assert len(lines) == 4


def test_eta_in_minutes_and_when_done():
    assert eta_text(50, 100, 120.0) == "2m"
    assert eta_text(100, 100, 5.0) == "0s"


def test_no_eta_from_the_first_few_cells():
    """8 training cells of 34,029 after 11 minutes say nothing of the replays' rate: no "46334m"."""
    assert eta_text(8, 34_029, 654.0) == "?"
    assert eta_text(339, 34_029, 700.0) == "?"  # under 1% of the cells
    assert eta_text(341, 34_029, 700.0) == "1153m"  # from 1%: 33,688 left at 341 per 700 s
    assert eta_text(1_009, 2_000, 60.0, done_at_start=1_000) == "?"  # a resumed run counts its own cells


def test_a_non_terminal_gets_lines(monkeypatch):
    import sys

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert isinstance(BarProgress(), LineProgress)
