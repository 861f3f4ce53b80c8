"""The driver's progress between results (`SweepLoop._heartbeat`): its clock moves, and a running label job's
positions, rate and ETA are its label, read from the job's progress file."""

from __future__ import annotations

import json
from types import SimpleNamespace

from orchestrator.run.loop import HEARTBEAT_S, SweepLoop
from workers.training.label_progress import progress_file


def _loop(tmp_path, files):
    reports = []
    loop = SimpleNamespace(_beat=-1e9, _labelling=files, label="", _report=lambda: reports.append(loop.label))
    return loop, reports


def test_a_running_label_job_shows_its_positions_and_eta(tmp_path):
    path = progress_file(tmp_path, "ab" * 32)
    loop, reports = _loop(tmp_path, {"ab" * 32: path})
    SweepLoop._heartbeat(loop)  # before the job's first pass: no file yet, the bare progress
    assert reports == [""]
    path.write_text(json.dumps({"name": "code-1e6", "done": 250_000, "total": 1_000_000, "rate": 500.0, "eta_s": 1500}))
    SweepLoop._heartbeat(loop)  # within HEARTBEAT_S of the last: nothing
    assert len(reports) == 1
    loop._beat -= HEARTBEAT_S
    SweepLoop._heartbeat(loop)
    assert reports[-1] == "code-1e6 250,000/1,000,000 positions, 500/s, ETA 25m"
    path.write_text(json.dumps({"name": "code-1e6", "done": 10, "total": 10, "rate": 5.0, "eta_s": 0.0}))
    loop._beat -= HEARTBEAT_S
    SweepLoop._heartbeat(loop)
    assert reports[-1].endswith("ETA 0s") and loop._labelling == {}  # labelled: no longer read
