"""A label job's progress file, read by the driver for its progress line (no torch here: the driver imports it).

The accelerator worker's label job (`workers.training.labels`) writes its counts there every few seconds; the
driver's loop reads them between results (`orchestrator.run.loop.SweepLoop._heartbeat`), so a labelling of 10^6
tokens, most of an hour on 2 CPU cores, shows its positions, rate and ETA instead of a still bar.
"""

from __future__ import annotations

import json
from pathlib import Path


def progress_file(out_dir, key: str) -> Path:
    """Where a label job keeps its progress (JSON: done, total, rate, eta_s), for the driver's progress line."""
    return Path(out_dir) / f".labels-{key[:12]}.progress.json"


def read_progress(path) -> dict | None:
    """A label job's progress as `_progress_reporter` last wrote it; None before its first pass (or unreadable)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
