"""Killing the driver with SIGKILL mid-sweep, then resuming: nothing lost, nothing counted twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from orchestrator.driver import RunOptions, resume
from storage.db import open_db
from storage.models import Cell, Generation
from tests.orchestrator.conftest import ray_address

pytestmark = pytest.mark.slow  # each test runs a real sweep in a subprocess

GREENSPEC = [sys.executable, "-m", "orchestrator.cli"]
# each job of the driver under test sleeps this long first, so it is surely mid-sweep when the test strikes (the
# resume, in this process, runs without it): ~1 s per batch in flight, not per cell of the whole grid
SLOW_S = "1.0"
ROOT = Path(__file__).resolve().parents[2]


def _wait_for_generations(url: str, at_least: int, timeout_s: float, proc: subprocess.Popen) -> int:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        assert proc.poll() is None, "the driver finished before it could be killed"
        try:
            _, Session = open_db(url, migrate=False)
            with Session() as s:
                n = s.scalar(select(func.count()).select_from(Generation)) or 0
            if n >= at_least:
                return n
        except Exception:  # schema not created yet
            pass
        time.sleep(0.2)
    raise AssertionError(f"no {at_least} generations within {timeout_s} s")


def test_kill_driver_then_resume(tmp_path, write_spec, ray_local):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    spec = write_spec(k=[2, 3])
    # a short lease: the killed driver's lapses in 3 s and `resume` waits for that (it refuses a live one)
    env = {**os.environ, "GREENSPEC_FAULT_SLOW": SLOW_S, "RAY_AUTH_MODE": "disabled", "GREENSPEC_LEASE_S": "3"}
    # the driver joins the session's Ray (a Ray of its own costs tens of seconds to start on a loaded machine)
    proc = subprocess.Popen([*GREENSPEC, "--db", url, "--address", ray_address(), "run", str(spec)], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait_for_generations(url, 4, timeout_s=120, proc=proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver dies mid-sweep; Ray reaps its accelerator worker
        proc.wait()
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        done_before = dict(s.execute(select(Generation.cell_id, Generation.id)).all())
        total = s.scalar(select(func.count()).select_from(Cell))
        assert s.scalar(select(func.count()).select_from(Cell).where(Cell.state == "running")) > 0
    assert 0 < len(done_before) < total

    report = resume(RunOptions(db_url=url, wait=True))

    assert report.counts == {"pending": 0, "running": 0, "done": total, "failed": 0}
    with Session() as s:
        after = dict(s.execute(select(Generation.cell_id, Generation.id)).all())
        n_sweep = s.scalar(select(func.count()).select_from(Cell).where(Cell.kind == "sweep"))
        # one generation per sweep cell: none lost, none duplicated, finished ones not re-run
        assert len(after) == n_sweep
        assert all(after[c] == g for c, g in done_before.items())
        assert all(g.exact_match for g in s.scalars(select(Generation)))


CLUSTER_SCRIPT = """
import sys, ray
from ray.cluster_utils import Cluster
from orchestrator.driver import RunOptions, run_spec_file
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
cluster.add_node(num_cpus=1, resources={"accelerator": 1})   # only this node can host the accelerator worker
ray.init(address=cluster.address, log_to_driver=False)
report = run_spec_file(sys.argv[1], RunOptions(db_url=sys.argv[2], address=cluster.address))
nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes()}
print("COUNTS", report.counts, "NODES", len(nodes))
ray.shutdown()
cluster.shutdown()
"""


def test_two_node_cluster(tmp_path, write_spec):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    out = subprocess.run([sys.executable, "-c", CLUSTER_SCRIPT, str(write_spec(k=[2])), url], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "'failed': 0" in out.stdout and "'pending': 0" in out.stdout and "NODES 2" in out.stdout
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        gens = s.scalars(select(Generation)).all()
        assert len(gens) == 3 * 2 * 2 and all(g.exact_match for g in gens)


def _sigint_default() -> None:
    """The driver starts with SIGINT's default action, as from a terminal: a process whose SIGINT is ignored
    (SIG_IGN is inherited; here, seen in full-suite runs, from whatever the pytest worker ran before) starts
    Python with Ctrl-C ignored, and the driver then finishes its sweep instead of stopping."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_cleanly_and_resume_finishes(tmp_path, write_spec, ray_local):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    env = {**os.environ, "GREENSPEC_FAULT_SLOW": SLOW_S, "RAY_AUTH_MODE": "disabled"}
    # k 2-4 and the first result: the interrupt lands with most of the sweep left (with k 2-3 and two results the
    # driver once finished first in a full suite run)
    proc = subprocess.Popen([*GREENSPEC, "--db", url, "--address", ray_address(), "run",
                             str(write_spec(k=[2, 3, 4]))], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_sigint_default)
    try:
        _wait_for_generations(url, 1, timeout_s=120, proc=proc)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C delivers to the driver
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err and "greenspec resume" in err and "Traceback" not in err
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        assert s.scalar(select(func.count()).select_from(Cell).where(Cell.state == "running")) == 0
    report = resume(RunOptions(db_url=url))
    assert report.counts["done"] == sum(report.counts.values())
