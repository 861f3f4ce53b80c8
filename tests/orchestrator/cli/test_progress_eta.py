"""The ETA weighs the cells left by their kind's measured cost (`KindEta`), on a hand-built replayed run whose timed
cells come last: trainings of a minute, references of seconds, replays of milliseconds, then timed cells of seconds.
It says "estimating" while a kind with cells left has no measured cost, and in the last phase it is never below the
time actually left by more than a minute."""

from __future__ import annotations

import io

from greenspec.status import kind_groups
from orchestrator.cli.progress import ESTIMATING, KindEta, LineProgress, kinds_text
from storage.models import CELL_KINDS, CELL_STATES

# (kind, cells, seconds per cell at the run's concurrency): the order a replayed run meets them
PHASES = (("train", 3, 60.0), ("reference", 6, 2.0), ("replay", 1000, 0.005), ("sweep", 10, 3.0))
BATCH = {"train": 1, "reference": 3, "replay": 50, "sweep": 1}  # cells that finish together


def counts(finished: dict[str, int], running: str | None) -> dict:
    """`storage.queries.status_counts` of the run when `finished` cells of each kind are done."""
    out = {"cells": dict.fromkeys(CELL_STATES, 0), **{k: dict.fromkeys(CELL_STATES, 0) for k in CELL_KINDS}}
    for kind, n, _ in PHASES:
        done = finished.get(kind, 0)
        run = min(BATCH[kind], n - done) if kind == running else 0
        out[kind].update(done=done, running=run, pending=n - done - run)
    return out


def timeline():
    """(time, finished per kind, the kind running) at each moment cells finish, the first at 0 s (nothing done)."""
    t, finished = 0.0, {}
    yield t, dict(finished), "train"
    for kind, n, cost in PHASES:
        while finished.get(kind, 0) < n:
            step = min(BATCH[kind], n - finished.get(kind, 0))
            t += cost * step
            finished[kind] = finished.get(kind, 0) + step
            nxt = kind if finished[kind] < n else next((k for k, m, _ in PHASES if finished.get(k, 0) < m), None)
            yield t, dict(finished), nxt


def test_estimating_until_every_kind_left_has_a_cost_then_never_short_by_a_minute():
    moments = list(timeline())
    end = moments[-1][0]
    eta, seen = KindEta(), []
    for t, finished, running in moments:
        groups = kind_groups(counts(finished, running))
        eta.observe(groups, t)
        seen.append((t, running, eta.left_s(groups)))
    for t, running, left in seen:
        if running in ("train", "reference", "replay"):  # the timed cells have not run: no cost for them yet
            assert left is None, (t, running, left)
    timed = [(t, left) for t, running, left in seen if running == "sweep" and t > seen[0][0]]
    first_timed = next(i for i, (t, r, _) in enumerate(seen) if r == "sweep")
    assert seen[first_timed][2] is None  # the last replay batch is in; no timed cell yet
    for t, left in timed[1:]:
        assert left is not None and left >= (end - t) - 60, (t, left, end - t)
    assert seen[-1][2] == 0.0  # nothing left
    per_cell = {k: eta.per_cell(g) for k, g in (("train", "training"), ("replay", "replay"), ("sweep", "timed"))}
    assert per_cell["train"] > 10 and per_cell["replay"] < 0.01 and 2.5 < per_cell["sweep"] < 3.5


def test_a_resumed_run_costs_only_what_it_runs():
    eta = KindEta()
    eta.observe(kind_groups(counts({"train": 3, "reference": 6, "replay": 500}, "replay")), 0.0)
    assert eta.per_cell("replay") is None  # 500 replays done before this run: no cost from them
    eta.observe(kind_groups(counts({"train": 3, "reference": 6, "replay": 550}, "replay")), 0.25)
    assert eta.per_cell("replay") == 0.005


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_line_counts_each_kind_by_state_and_says_estimating():
    out, clock = io.StringIO(), Clock()
    with LineProgress(out, every_s=30, clock=clock) as p:
        p.kinds(counts({"train": 3, "reference": 6}, "replay"))
        p.start(total=1019, done=9, failed=0)
        clock.t += 40
        p.kinds(counts({"train": 3, "reference": 6, "replay": 1000}, "sweep"))
        p.update(1009, 0, "ngram (replay)", "replays")
        clock.t += 3
        p.kinds(counts({"train": 3, "reference": 6, "replay": 1000, "sweep": 1}, "sweep"))
        p.update(1010, 0, "ngram", "timed cells")
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        f"cells 9/1019 (1%), failed 0, 0s, ETA {ESTIMATING} [training 3/3, reference 6/6, replay 0/1000 (50 running), "
        "timed 0/10]"
    )
    assert lines[1].startswith(f"cells 1009/1019 (99%), failed 0, 40s, ETA {ESTIMATING} [")
    assert lines[2] == (
        "cells 1010/1019 (99%), failed 0, 43s, ETA 27s [training 3/3, reference 6/6, replay 1000/1000, timed 1/10 "
        "(1 running)]; timed cells: ngram"
    )


def test_kinds_text_leaves_out_kinds_without_cells():
    groups = kind_groups(counts({"replay": 10}, "replay"))
    groups["training"] = dict.fromkeys(CELL_STATES, 0)
    assert kinds_text(groups).startswith("reference 0/6, replay 10/1000 (50 running)")


def test_timed_cells_take_the_runs_prediction_until_one_has_run():
    """Before any timed cell has finished, their cost is what the run predicts for them (`predicted_s`, their replayed
    twins' seconds), so the ETA is a figure once every other kind left has a measured cost; the first timed cell's
    measured seconds then replace the prediction."""
    eta = KindEta()
    eta.observe(kind_groups(counts({"train": 3, "reference": 6, "replay": 900}, "replay")), 0.0, {"timed": 2.0})
    groups = kind_groups(counts({"train": 3, "reference": 6, "replay": 950}, "replay"))
    eta.observe(groups, 0.25, {"timed": 2.0})
    assert eta.per_cell("timed") == 2.0
    assert eta.left_s(groups) == 50 * 0.005 + 10 * 2.0  # replays at their measured cost, timed cells as predicted
    eta.observe(kind_groups(counts({"train": 3, "reference": 6, "replay": 1000}, "sweep")), 0.5, {"timed": 2.0})
    groups = kind_groups(counts({"train": 3, "reference": 6, "replay": 1000, "sweep": 1}, "sweep"))
    eta.observe(groups, 3.5, {"timed": 2.0})
    assert eta.per_cell("timed") == 3.0  # measured: the prediction no longer counts
    no_prediction = KindEta()
    no_prediction.observe(kind_groups(counts({"train": 3, "reference": 6, "replay": 900}, "replay")), 0.0)
    no_prediction.observe(kind_groups(counts({"train": 3, "reference": 6, "replay": 950}, "replay")), 0.25)
    assert no_prediction.left_s(kind_groups(counts({"train": 3, "reference": 6, "replay": 950}, "replay"))) is None


def test_the_line_reads_the_prediction_from_the_counts():
    out, clock = io.StringIO(), Clock()
    with LineProgress(out, every_s=30, clock=clock) as p:
        p.kinds({**counts({"train": 3, "reference": 6, "replay": 900}, "replay"), "predicted_s": {"timed": 4.0}})
        p.start(total=1019, done=909, failed=0)
        clock.t += 1
        p.kinds({**counts({"train": 3, "reference": 6, "replay": 1000}, "sweep"), "predicted_s": {"timed": 4.0}})
        p.update(1009, 0, "ngram (replay)", "timed cells")
    assert " ETA 40s [" in out.getvalue().splitlines()[-1]  # 10 timed cells x 4 s predicted
