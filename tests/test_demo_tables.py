"""`python -m bench.demo_tables DB`: the demo tables of docs/demo.md, read back from a finished run's database."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.dashboard.populate import populate

ROOT = Path(__file__).resolve().parents[1]


def test_demo_tables_print_every_regime_and_cell(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    populate(url)
    out = subprocess.run(
        [sys.executable, "-m", "bench.demo_tables", url, "fixture"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for title in (
        "uncached: acceptance / speedup",
        "cached: acceptance / speedup",
        "plain greedy",
        "every drafted cell",
    ):
        assert title in out.stdout
    assert "| olifant-wikitext" in out.stdout and " / " in out.stdout
    assert re.search(r"\d\.\d\dx \[\d+\.\d\d, \d+\.\d\d\] +\|", out.stdout)  # a speedup with its 95% interval
    assert "exact match: min" in out.stdout and "nan" not in out.stdout.split("every drafted cell")[0]
