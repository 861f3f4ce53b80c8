"""`greenspec dashboard`'s launcher, and the real thing: streamlit serving the fixture, read by headless Chromium."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from dashboard import launch

HEALTH_WAIT_S = 60
PAGE_WAIT_S = 60  # a fresh server answers health before its first page is ready; slower on a busy machine


def test_command_binds_localhost_headless_on_the_port():
    cmd = launch.command(port=8600)
    assert cmd[1:4] == ["-m", "dashboard.serve", "run"] and Path(cmd[4]) == launch.APP
    opts = dict(zip(cmd[5::2], cmd[6::2]))
    assert opts["--server.address"] == "127.0.0.1"
    assert opts["--server.port"] == "8600"
    assert opts["--server.headless"] == "true"
    assert dict(zip(*[iter(launch.command(headless=False)[5:])] * 2))["--server.headless"] == "false"


def test_environment_names_the_database():
    assert launch.environment("sqlite:////data/x.db")["GREENSPEC_DB"] == "sqlite:////data/x.db"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + HEALTH_WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "streamlit exited early"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"streamlit not healthy on port {port} after {HEALTH_WAIT_S} s")


def _dump_dom(chromium: str, url: str, profile: Path) -> str:
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={profile}",
        "--window-size=1400,2000",
        "--virtual-time-budget=15000",
        "--dump-dom",
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90).stdout


def _grid_cells(dom: str) -> list[str]:
    return re.findall(r'role="gridcell"[^>]*>([^<]*)<', dom)


def test_browser_shows_overview_tables_from_the_database(fixture_db, tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        reason = "chromium is not installed (make browser installs Debian's chromium)"
        print(reason)
        pytest.skip(reason)
    port = _free_port()
    log = (tmp_path / "streamlit.log").open("w")
    proc = subprocess.Popen(
        launch.command(port), env=launch.environment(fixture_db), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        _wait_healthy(port, proc)
        cells: list[str] = []
        deadline = time.monotonic() + PAGE_WAIT_S
        while "olifant-wikitext" not in cells and time.monotonic() < deadline:
            cells = _grid_cells(_dump_dom(chromium, f"http://127.0.0.1:{port}/", tmp_path / "chrome"))
        assert "olifant-wikitext" in cells and "plain" in cells  # the results table, from the database
        assert any(c.startswith("DraftError") for c in cells)  # the failures table
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_the_server_preloads_the_pages_modules_but_not_their_caches_nor_torch():
    """`dashboard.serve` imports what the pages compute with before the first view; not the modules that declare
    Streamlit caches (they belong to the server's runtime, which does not exist yet) and never torch (~300 MB)."""
    probe = (
        "import sys; from dashboard.serve import preload; preload(); "
        "print(sorted(m for m in ('storage.summary', 'analysis.paper', 'plotly.express', 'dashboard.reads', "
        "'dashboard.ui', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["['analysis.paper',", "'plotly.express',", "'storage.summary']"], out.stderr
