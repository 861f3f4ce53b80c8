"""Start the dashboard: `streamlit run dashboard/app.py` bound to 127.0.0.1 (what `greenspec dashboard` calls),
through `dashboard.serve`, which imports the pages' modules before the first view.

The Streamlit server is this process's child and never outlives it: SIGTERM or Ctrl-C stops it, and on Linux
the kernel sends it SIGTERM if this process dies any other way (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

DB_ENV = "GREENSPEC_DB"  # names the database the dashboard reads
APP = Path(__file__).resolve().parent / "app.py"
STOP_TIMEOUT_S = 10  # how long the child gets to exit after SIGTERM before it is killed
PR_SET_PDEATHSIG = 1


def command(port: int = 8501, headless: bool = True) -> list[str]:
    """The `streamlit run` command line (through `dashboard.serve`), localhost only (results may be unpublished)."""
    return [
        sys.executable,
        "-m",
        "dashboard.serve",
        "run",
        str(APP),
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--server.headless",
        "true" if headless else "false",
        "--browser.gatherUsageStats",
        "false",
    ]


def environment(db_url: str) -> dict[str, str]:
    """This process's environment with GREENSPEC_DB set to `db_url`."""
    return {**os.environ, DB_ENV: db_url}


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether `host:port` can be bound now (checked before the URL is printed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is not "taken"
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _die_with_parent() -> None:
    """In the child, before exec: receive SIGTERM when the parent dies (Linux; a no-op elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _stop(child: subprocess.Popen) -> int:
    """Terminate the child and wait for it (killed if it ignores SIGTERM)."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return child.returncode


def launch(db_url: str, port: int = 8501, headless: bool = True) -> int:
    """Run the dashboard until interrupted; returns streamlit's exit code (0 after Ctrl-C or SIGTERM)."""
    logger.info("dashboard on http://127.0.0.1:%d over %s", port, db_url)
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    child = subprocess.Popen(command(port, headless), env=environment(db_url), preexec_fn=preexec)

    def terminate(signum, frame):
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if main else None
    try:
        return child.wait()
    except KeyboardInterrupt:
        _stop(child)
        return 0
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        _stop(child)
