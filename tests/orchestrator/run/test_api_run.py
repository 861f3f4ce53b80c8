"""`greenspec.run` from Python runs a spec as `greenspec run` does (resumable), and its results read back."""

from __future__ import annotations

import pytest

import greenspec
from tests.orchestrator.conftest import small_spec

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]


def test_run_from_python_then_read_its_results(tmp_path, write_spec):
    url, spec = f"sqlite:///{tmp_path / 'g.db'}", small_spec(write_spec, [2])
    first = greenspec.run(spec, db=url)
    assert first.added > 0 and first.counts["failed"] == 0 and first.counts["pending"] == 0
    assert greenspec.run(spec, db=url).added == 0  # finished cells are never run again
    results = greenspec.open_results(url).results(first.experiment)
    assert set(results["strategy"]) == {"plain", "olifant-pydoc"} and (results["exact_match"] == 1.0).all()
