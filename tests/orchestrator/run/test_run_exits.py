"""`run`, `resume` and `retry` exit 1 when cells ended failed (the last line counts them; 2 stays for
refused input), and answer at once, without Ray, when no cell is left to run."""

from __future__ import annotations

import time

import pytest

from orchestrator.run import driver
from tests.orchestrator.conftest import cli

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]


def no_ray(opts):
    raise AssertionError("Ray was started with nothing to run")


def test_failed_cells_exit_1_and_nothing_to_run_starts_no_ray(write_spec, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    spec = str(write_spec(k=[2], attempts=1, **{'regimes = ["uncached", "cached"]': 'regimes = ["cached"]'}))
    monkeypatch.setenv("GREENSPEC_FAULT_RAISE", "ngram")  # the driver's settings reach its accelerator worker
    code, out, err = cli("--db", url, "run", spec)
    assert code == 1, err
    assert out.strip().splitlines()[-1:] and out.strip().splitlines()[-1].startswith("2 cells failed: "), out + err
    monkeypatch.setattr(driver, "ray_up", no_ray)
    for args in (["resume"], ["run", spec]):  # nothing pending: at once, no Ray; the failed cells still count
        code, out, err = cli("--db", url, *args)
        assert code == 1 and "0 pending" in out and "2 cells failed" in out, err
    monkeypatch.undo()
    code, out, err = cli("--db", url, "retry", "--failed")
    assert code == 0 and "0 failed" in out and "failed:" not in out, err
    monkeypatch.setattr(driver, "ray_up", no_ray)
    for args in (["resume"], ["retry", "--failed"], ["run", spec]):
        t0 = time.monotonic()
        code, out, err = cli("--db", url, *args)
        assert code == 0 and "0 new cells" in out and "0 pending" in out, err
        assert time.monotonic() - t0 < 15  # the spec is re-read and checked, no more


def test_unfinished_cells_of_an_earlier_spec_are_refused_or_dropped(write_spec, tmp_path, monkeypatch):
    """Cells keyed for max_new_tokens = 16, left pending, must not run under a spec that says 8."""
    from sqlalchemy import func, select

    from storage.db import open_db
    from storage.models import Cell, Experiment
    from tests.orchestrator.cli.test_cli_runs import _register_only

    url = f"sqlite:///{tmp_path / 'g.db'}"
    old = write_spec(name="c", k=[2])
    _register_only(url, old)  # a run of the old spec interrupted before any cell finished
    new = write_spec(name="c", k=[2], **{"max_new_tokens = 16": "max_new_tokens = 8"})
    assert "max_new_tokens = 8" in new.read_text()
    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        before = s.scalar(select(func.count()).select_from(Cell))
    monkeypatch.setattr(driver, "ray_up", no_ray)
    code, _, err = cli("--db", url, "run", str(new))
    lines = err.strip().splitlines()
    stale = before - 1  # every cell but the train cell, whose key does not hash max_new_tokens
    assert code == 2 and len(lines) == 1 and f"{stale} unfinished cells" in lines[0] and "--drop-stale" in lines[0]
    with Session() as s:  # refused before any write: the old cells and the old spec text stay
        assert s.scalar(select(func.count()).select_from(Cell)) == before
        assert "max_new_tokens = 16" in s.scalar(select(Experiment.spec_toml))
    ran: list[int] = []
    monkeypatch.setattr(driver, "_run_on_ray", lambda spec, exp_id, *a: ran.append(spec.sweep.max_new_tokens))
    code, out, err = cli("--db", url, "run", str(new), "--drop-stale")
    assert code == 0 and ran == [8], err
    with Session() as s:  # only the new spec's cells are left, all of them new
        assert s.scalar(select(func.count()).select_from(Cell)) == before
        assert f"({stale} new cells" in out
    engine.dispose()
