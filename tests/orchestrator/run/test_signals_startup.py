"""Ctrl-C or SIGTERM while the driver starts its own Ray gives the one-line message and exit 130, and leaves no
Ray process behind (before, SIGINT there gave `Aborted!`, exit 1, and orphaned Ray agents, and SIGTERM late in
`ray.init` killed the driver by the default action, exit -15, because Ray's core worker takes SIGTERM over
while it connects). The delays put Ctrl-C early in `ray.init` and SIGTERM late inside it, where Ray's core worker
holds it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from sqlalchemy import func, select

from storage.db import open_db
from storage.models import Cell, Lease

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


def registered(url: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Wait until the driver stored its cells (the next thing it does is start Ray)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        try:
            engine, Session = open_db(url, migrate=False)
            with Session() as s:
                n = s.scalar(select(func.count()).select_from(Cell))
            engine.dispose()
            if n:
                return
        except Exception:  # the schema is not there yet
            pass
        time.sleep(0.1)
    raise AssertionError("the driver registered no cells")


def ray_processes(tmp: str) -> list[str]:
    """Command lines of live processes of the Ray whose temp folder is `tmp`."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if tmp in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(cmd[:200])
    return out


@pytest.mark.parametrize(("sig", "delay_s"), [(signal.SIGINT, 0.5), (signal.SIGTERM, 2.5)])
def test_a_signal_during_ray_start_up_exits_130_and_leaves_no_ray(sig, delay_s, write_spec, tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    ray_tmp = tempfile.mkdtemp(prefix="gsr", dir="/tmp")  # short: Ray's socket paths live under it
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "--db", url, "run", str(write_spec(k=[2]))],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        registered(url, proc)
        time.sleep(delay_s)  # into ray.init (it takes seconds here)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err[-2000:]
        lines = [ln for ln in err.splitlines() if ln.startswith("greenspec: error:")]
        assert len(lines) == 1 and "interrupted" in lines[0], err[-2000:]
        assert "Traceback" not in err and "Aborted!" not in err, err[-2000:]
        deadline = time.monotonic() + 20  # Ray's own shutdown stops its processes within seconds
        while ray_processes(ray_tmp) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not ray_processes(ray_tmp), ray_processes(ray_tmp)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for p in psutil.process_iter(["cmdline"]):  # whatever a failed assertion left
            if ray_tmp in " ".join(p.info["cmdline"] or []):
                p.kill()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        assert s.scalar(select(func.count()).select_from(Cell).where(Cell.state == "running")) == 0
        assert s.scalar(select(func.count()).select_from(Lease)) == 0
    engine.dispose()
