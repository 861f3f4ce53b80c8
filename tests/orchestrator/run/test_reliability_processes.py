"""Issue 13 with real processes: a second driver refuses or waits (case 2); a kill -9'd driver loses no finished
cell, re-runs none, and its lease lapses; Ctrl-C and SIGTERM stop a run without using up attempts; the dashboard's
Streamlit child never outlives `greenspec dashboard` (case 8). Kill -9 at random moments: test_chaos.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import func, select

from storage.db import open_db
from storage.models import Cell, Generation, Lease
from tests.orchestrator.conftest import cli, ray_address, small_spec

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]

GREENSPEC = [sys.executable, "-m", "orchestrator.cli"]
ROOT = Path(__file__).resolve().parents[3]


def _sigint_default() -> None:
    """The driver starts with SIGINT's default action, as from a terminal: a process whose SIGINT is ignored
    (SIG_IGN is inherited; seen in full-suite runs, from whatever the pytest worker ran before) starts Python with
    Ctrl-C ignored, and the driver then finishes its sweep instead of stopping."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_driver(url: str, *args: str, slow_s: float = 0.3, lease_s: float = 30) -> subprocess.Popen:
    """A `greenspec` driver process joined to the session's Ray (`--address`): killing it kills the driver, whose
    accelerator worker Ray then reaps; what these tests check (leases, signals) is the driver's. Each job of its
    worker sleeps `slow_s` first, so a test can strike mid-sweep."""
    env = {
        **os.environ,
        "GREENSPEC_FAULT_SLOW": str(slow_s),
        "GREENSPEC_LEASE_S": str(lease_s),
        "RAY_AUTH_MODE": "disabled",
    }
    return subprocess.Popen(
        [*GREENSPEC, "--db", url, "--address", ray_address(), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_sigint_default,
    )


def wait_for(url: str, proc: subprocess.Popen, generations: int, timeout_s: float = 180) -> str:
    """Wait until the driver holds its lease and stored `generations`; returns the lease holder."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        try:
            engine, Session = open_db(url, migrate=False)
            with Session() as s:
                holder = s.scalar(select(Lease.holder))
                n = s.scalar(select(func.count()).select_from(Generation)) or 0
            engine.dispose()
            if holder and n >= generations:
                return holder
        except Exception:  # the schema is not there yet
            pass
        time.sleep(0.3)
    raise AssertionError(f"no lease and {generations} generations within {timeout_s} s")


def counts(url: str) -> dict[str, int]:
    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        out = dict(s.execute(select(Cell.state, func.count()).group_by(Cell.state)).all())
        out["generations"] = s.scalar(select(func.count()).select_from(Generation))
        out["sweep"] = s.scalar(select(func.count()).select_from(Cell).where(Cell.kind == "sweep"))
    engine.dispose()
    return out


def test_a_second_driver_refuses_or_waits(db_url, write_spec, tmp_path):
    spec = write_spec(k=[2, 3])
    first, waiter = start_driver(db_url, "run", str(spec)), None
    try:
        holder = wait_for(db_url, first, 2)
        assert f":{first.pid}:" in holder
        # a second `run` of the same spec and a `resume`: refused in one line naming the holder, nothing touched
        for cmd in (["run", str(spec)], ["resume"]):
            code, _, err = cli("--db", db_url, *cmd)
            lines = err.strip().splitlines()
            assert code == 2 and len(lines) == 1 and holder in lines[0] and "--wait" in lines[0], err
        # `--wait` waits for the first driver, then finds nothing left to do
        waiter = start_driver(db_url, "resume", "-e", "t", "--wait")
        # another experiment in the same database is not refused: it takes its own lease, registers and trains
        # while the first runs (its accelerator work queues behind the first driver's on the one accelerator)
        code, out, err = cli("--db", db_url, "run", str(small_spec(write_spec, [2], name="other")))
        assert code == 0 and "0 failed" in out, err
        _, err = first.communicate(timeout=300)
        assert first.returncode == 0, err[-2000:]
        out, err = waiter.communicate(timeout=300)
        assert waiter.returncode == 0 and "0 pending" in out, err[-2000:]
    finally:
        for p in (first, waiter):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    c = counts(db_url)
    assert c.get("running", 0) == 0 and c.get("failed", 0) == 0 and c.get("pending", 0) == 0
    assert c["generations"] == c["sweep"]


def test_a_killed_driver_loses_nothing_and_its_lease_is_taken_at_once(write_spec, tmp_path):
    """kill -9 mid-sweep, then `resume` at once: the dead driver's lease, though far from lapsing, is
    taken with one line saying so; every finished cell's result is kept as it was (nothing re-run), the rest
    finish once each."""
    url = f"sqlite:///{tmp_path / 'g.db'}"
    lease_s = 3600  # only the holder's death can free it in this test
    first = start_driver(url, "run", str(write_spec(k=[2, 3])), lease_s=lease_s, slow_s=1.0)
    try:
        holder = wait_for(url, first, 4)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver dies at once: no chance to release
        first.wait()
    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        done_before = dict(s.execute(select(Generation.cell_id, Generation.id)).all())
        assert s.scalar(select(func.count()).select_from(Cell).where(Cell.state == "running")) > 0
    second = start_driver(url, "resume", lease_s=lease_s, slow_s=0)  # as a user runs it: its stderr is the terminal's
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0 and "0 pending" in out and "0 failed" in out, err[-2000:]
    assert len([ln for ln in err.splitlines() if "took over the lease" in ln and holder in ln]) == 1, err[-2000:]
    c = counts(url)
    assert 4 <= len(done_before) < c["sweep"]
    assert c["generations"] == c["sweep"] and c.get("running", 0) == 0  # one generation per cell: none lost or doubled
    with Session() as s:
        after = dict(s.execute(select(Generation.cell_id, Generation.id)).all())
        assert all(after[cell] == gen for cell, gen in done_before.items())  # finished cells were not re-run
        assert all(g.exact_match for g in s.scalars(select(Generation)))
    engine.dispose()


def test_ctrl_c_and_sigterm_stop_a_run_cleanly_and_keep_attempts(write_spec, tmp_path):
    """Ctrl-C (SIGINT) stops `run`, and `kill PID` (SIGTERM) stops the `resume` after it, the same way: exit 130,
    one line saying how to go on, no cell left running, no attempt used up, the lease given back."""
    url = f"sqlite:///{tmp_path / 'g.db'}"
    # k 2-4 at 1 s a job: the interrupts land with most of the sweep left (with k 2-3 a driver once finished first);
    # plain and olifant in one regime: the cells after the interrupts are the test's cost, not its subject
    stored = 0
    for args, sig in ((["run", str(small_spec(write_spec, [2, 3, 4]))], signal.SIGINT), (["resume"], signal.SIGTERM)):
        proc = start_driver(url, *args, slow_s=1.0)
        try:
            wait_for(url, proc, stored + 1)  # each driver stores a result of its own first
            proc.send_signal(sig)  # to the driver only, as Ctrl-C in its terminal or `kill PID` does
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 130, err[-2000:]
        assert "interrupted" in err and "greenspec resume" in err and "Traceback" not in err, err[-2000:]
        engine, Session = open_db(url, migrate=False)
        with Session() as s:
            assert s.scalar(select(func.count()).select_from(Cell).where(Cell.state == "running")) == 0
            assert s.scalar(select(func.max(Cell.attempts)).where(Cell.state == "pending")) == 0  # none used up
            assert s.scalar(select(func.count()).select_from(Cell).where(Cell.state == "pending")) > 0
            assert s.scalar(select(func.count()).select_from(Lease)) == 0  # given back
            stored = s.scalar(select(func.count()).select_from(Generation))
        engine.dispose()
    code, out, err = cli("--db", url, "resume")
    assert code == 0 and "0 pending" in out and "0 failed" in out, err
    c = counts(url)
    assert c["generations"] == c["sweep"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.read() == b"ok"
    except OSError:
        return False


def test_sigterm_to_the_dashboard_stops_streamlit(tmp_path):
    port = _free_port()
    proc = subprocess.Popen(
        [*GREENSPEC, "--db", f"sqlite:///{tmp_path / 'g.db'}", "dashboard", "--port", str(port)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not _healthy(port):
            assert proc.poll() is None and time.monotonic() < deadline, "the dashboard did not come up"
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)  # to greenspec only, not its process group
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while _healthy(port) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert not _healthy(port), "the Streamlit child still serves the port"
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))  # the port is free again
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # anything left in its group (the test's own cleanup)
            except ProcessLookupError:
                pass
