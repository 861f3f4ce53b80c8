"""Chaos (issue 13): kill -9 the driver once in each phase of a run (starting up, training, references, the timed
sweep, and at seeded random moments between commits), resume each time, and check at the end: every cell done
exactly once, every generation equal to its own prompt's greedy reference, and no stored metric ever rewritten.

The drivers join the test session's Ray (`--address`), so a relaunch costs seconds; a killed driver's lease is taken
at once by the next driver on this host (`--wait` covers a lease that lapses after GREENSPEC_LEASE_S = 2 s). A phase's
kill lands when the database shows one of its cells running, after a seeded random delay of under half a second;
one kill per phase is the point (a second one in the same phase reaches the same code). GREENSPEC_CHAOS_POINTS sets
the number of kills at random moments after those (default 2) and GREENSPEC_CHAOS_SEED the seed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from storage.db import open_db
from storage.models import Cell, Generation, InstanceBase, Reference

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
POINTS = int(os.environ.get("GREENSPEC_CHAOS_POINTS", "2"))
SEED = int(os.environ.get("GREENSPEC_CHAOS_SEED", "13"))


def snapshot(url: str) -> dict[int, tuple]:
    """generation id -> (cell, ROUGE-L, exact match, tokens); {} before the schema exists."""
    try:
        engine, Session = open_db(url, migrate=False)
        with Session() as s:
            rows = s.execute(
                select(Generation.id, Generation.cell_id, Generation.rouge_l, Generation.exact_match, Generation.tokens)
            ).all()
        engine.dispose()
    except Exception:  # the first driver was killed before it created the schema
        return {}
    return {r[0]: (r[1], r[2], r[3], tuple(r[4])) for r in rows}


def unfinished(url: str) -> int | None:
    """Cells not done yet; None while no driver got as far as registering the experiment's cells."""
    try:
        engine, Session = open_db(url, migrate=False)
        with Session() as s:
            total = s.scalar(select(func.count()).select_from(Cell))
            n = s.scalar(select(func.count()).select_from(Cell).where(Cell.state != "done"))
        engine.dispose()
    except Exception:  # killed before the schema existed
        return None
    return n if total else None


def running(url: str) -> set[tuple[str, int, object]]:
    """(kind, cell id, started at) of the cells marked running; empty before the schema exists."""
    try:
        engine, Session = open_db(url, migrate=False)
        with Session() as s:
            rows = s.execute(select(Cell.kind, Cell.id, Cell.started_at).where(Cell.state == "running")).all()
        engine.dispose()
    except Exception:  # killed before the schema existed
        return set()
    return {tuple(r) for r in rows}


def left_of(url: str, kind: str) -> int | None:
    """Cells of `kind` not done yet; None before the schema exists."""
    try:
        engine, Session = open_db(url, migrate=False)
        with Session() as s:
            n = s.scalar(select(func.count()).select_from(Cell).where(Cell.kind == kind, Cell.state != "done"))
        engine.dispose()
    except Exception:  # killed before the schema existed
        return None
    return n


def strike(url: str, proc: subprocess.Popen, when: float | str, stale: set, rng: random.Random) -> None:
    """Kill -9 the driver `when` seconds after its start, or (a cell kind) once it runs one of those cells: one not
    in `stale`, the cells a killed driver left marked running (or at once if that phase ends unseen)."""
    deadline = time.monotonic() + (when if isinstance(when, float) else 120)
    while proc.poll() is None and time.monotonic() < deadline:
        if isinstance(when, str) and (any(r[0] == when for r in running(url) - stale) or left_of(url, when) == 0):
            time.sleep(rng.uniform(0.0, 0.5))
            break
        time.sleep(0.05)
    else:
        assert isinstance(when, float) or proc.poll() is not None, f"the driver ran no {when} cell within 120 s"
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# one scenario end to end (kill -9 in each phase and at random points, then resume and compare), kept in one piece
def test_kill_nine_at_random_points_then_resume(tmp_path, write_spec, ray_local):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    arts = tmp_path / "arts"
    spec = write_spec(k=[2, 3, 4], attempts=3, **{"[experiment]": f'[experiment]\nartifacts = "{arts}"'})
    address = ray_local.get_runtime_context().gcs_address
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "disabled",
        "GREENSPEC_LEASE_S": "2",
        "GREENSPEC_FAULT_SLOW": "0.2",
        "PYTHONPATH": str(ROOT),
    }
    rng = random.Random(SEED)
    # The first kill lands while the driver starts up or migrates the new file (a migration lands whole or not at
    # all), then one in each phase as the issue asks, then at random moments (mid-dispatch, mid-store).
    plan: list[float | str] = [rng.uniform(1.0, 3.0), "train", "reference", "sweep"]
    plan += [rng.uniform(3.0, 8.0) for _ in range(POINTS)]
    seen: list[dict[int, tuple]] = []
    for when in plan:
        left = unfinished(url)
        if left == 0:
            break
        if isinstance(when, str) and left_of(url, when) == 0:
            continue  # that phase was finished by an earlier driver
        stale = running(url)
        args = ["run", str(spec), "--wait"] if left is None else ["resume", "--wait"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "--db", url, "--address", address, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        strike(url, proc, when, stale, rng)
        seen.append(snapshot(url))
    last_args = ["run", str(spec), "--wait"] if unfinished(url) is None else ["resume", "--wait"]
    final = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "--db", url, "--address", address, *last_args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert final.returncode == 0, final.stderr[-3000:]
    assert len(seen) >= 4

    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        kinds = dict(s.execute(select(Cell.kind, func.count()).group_by(Cell.kind)).all())
        assert s.scalar(select(func.count()).select_from(Cell).where(Cell.state != "done")) == 0
        # exactly once: one result row per cell (unique cell ids), as many as there are cells of that kind
        for table, kind in ((Generation, "sweep"), (Reference, "reference"), (InstanceBase, "train")):
            assert s.scalar(select(func.count(func.distinct(table.cell_id)))) == kinds[kind]
            assert s.scalar(select(func.count()).select_from(table)) == kinds[kind]
        gens = s.scalars(select(Generation)).all()
        refs = dict(s.execute(select(Reference.prompt_key, Reference.tokens)).all())
    engine.dispose()
    assert all(g.exact_match is True and g.rouge_l == 1.0 and list(g.tokens) == list(refs[g.prompt_key]) for g in gens)
    last = snapshot(url)
    for snap in seen:  # a stored metric is never rewritten; a result, once stored, is never replaced
        for gid, (cell, rouge, exact, tokens) in snap.items():
            assert last[gid][0] == cell and last[gid][3] == tokens
            if rouge is not None:
                assert last[gid][1:3] == (rouge, exact)
    assert not list(arts.glob(".work-*"))  # scratch folders of killed trainings were cleaned up
