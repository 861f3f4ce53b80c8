"""Every command of the README's CLI table, as written there, against a small spec and the small finished
database its `run` leaves: each exits 0 with no traceback. A row added to the table without a case here fails."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.orchestrator.conftest import cli, small_spec

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]
SKIPPED = {"demo": "the whole offline demo; tests/orchestrator/cli/test_demo.py runs it"}


def readme_commands() -> list[str]:
    """The command column of the README's CLI table, e.g. `greenspec resume [-e NAME]`."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The CLI", 1)[1].split("\n## ", 1)[0]
    return [m.replace("\\|", "|") for m in re.findall(r"^\| `(greenspec [^`]+)` \|", section, flags=re.M)]


def case_name(command: str) -> str:
    """`greenspec export --compare paper [...]` -> "export --compare"; other commands by their verb."""
    words = command.split()
    return f"{words[1]} --compare" if "--compare" in words else words[1]


def cases(spec: str, tmp: Path, corpus: str) -> dict[str, list[list[str]]]:
    """Each table row's command, its placeholders filled, in the order a newcomer would try them."""
    return {
        "validate": [["validate", spec]],
        "run": [["run", spec], ["run", spec, "--wait"]],
        "resume": [["resume"], ["resume", "-e", "t"]],
        "retry": [["retry", "--failed"]],
        "status": [["status"], ["status", "--json"]],
        "export": [
            ["export", "--format", f, "--out", str(tmp / f"t.{f}")] for f in ("csv", "parquet", "markdown", "latex")
        ]
        + [["export", "--format", "csv", "--out", str(tmp / "t.csv"), "--force", "--pooled"]],
        "export --compare": [
            ["export", "--compare", "paper"],
            ["export", "--compare", "paper", "--format", "markdown"],
        ],
        "findings": [["findings"], ["findings", "--format", "json", "--out", str(tmp / "f.json")]],
        "report": [["report", "--out", str(tmp / "r.html")], ["report", "--out", str(tmp / "r.html"), "--force"]],
        "power": [["power", "--seconds", "1"]],
        "doctor": [["doctor"]],
        "latency": [["latency", spec, "--prompts", "2", "--repeats", "2", "--out", str(tmp / "lat.csv")]],
        "train": [["train", spec, "--corpus", corpus, "--out", str(tmp / "c.igtree"), "--memory-gb", "0.5"]],
        "costs": [["costs", "list"]],  # measure, import and repredict: tests/orchestrator/cli/test_costs_cli.py
    }


def test_every_command_of_the_readme_table_runs_as_written(write_spec, tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    spec = str(small_spec(write_spec, [2], **{"[experiment]": f'[experiment]\nartifacts = "{tmp_path / "arts"}"'}))
    table = {case_name(c) for c in readme_commands()}
    todo = cases(spec, tmp_path, "pydoc")
    assert table == set(todo) | {"dashboard"} | set(SKIPPED), table
    for runs in todo.values():
        for args in runs:
            t0 = time.monotonic()
            code, out, err = cli("--db", url, *args)
            assert code == 0, f"greenspec {' '.join(args)} -> {code}: {err[-1500:]}"
            assert "Traceback" not in out + err and "unexpected" not in err, err[-1500:]
            print(f"{time.monotonic() - t0:6.1f} s  greenspec {' '.join(args)}")
    dashboard_starts_and_stops(url, tmp_path)


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.read() == b"ok"
    except OSError:
        return False


def dashboard_starts_and_stops(url: str, tmp: Path) -> None:
    """`greenspec dashboard --port N` serves, then Ctrl-C stops it (a real process: Streamlit is its child)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "--db", url, "dashboard", "--port", str(port)],
        cwd=tmp,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not _healthy(port):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-1500:]
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode in (0, 130), err[-1500:]
        assert f"http://127.0.0.1:{port}" in out and "Traceback" not in err, err[-1500:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
