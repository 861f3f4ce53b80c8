"""Start the dashboard: `streamlit run dashboard/app.py` bound to 127.0.0.1 (what `greenspec dashboard` calls)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

DB_ENV = "GREENSPEC_DB"  # names the database the dashboard reads
APP = Path(__file__).resolve().parent / "app.py"


def command(port: int = 8501, headless: bool = True) -> list[str]:
    """The `streamlit run` command line, localhost only (results may be unpublished)."""
    return [sys.executable, "-m", "streamlit", "run", str(APP),
            "--server.address", "127.0.0.1", "--server.port", str(port),
            "--server.headless", "true" if headless else "false",
            "--browser.gatherUsageStats", "false"]


def environment(db_url: str) -> dict[str, str]:
    """This process's environment with GREENSPEC_DB set to `db_url`."""
    return {**os.environ, DB_ENV: db_url}


def launch(db_url: str, port: int = 8501, headless: bool = True) -> int:
    """Run the dashboard until interrupted; returns streamlit's exit code (0 after Ctrl-C)."""
    logger.info("dashboard on http://127.0.0.1:%d over %s", port, db_url)
    try:
        return subprocess.call(command(port, headless), env=environment(db_url))
    except KeyboardInterrupt:
        return 0
