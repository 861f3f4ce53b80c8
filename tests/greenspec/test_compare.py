"""Two experiments side by side (`greenspec.compare`): hand-worked frames, then `export --compare NAME` and
`Results.compare` on a database holding two runs of the fixture experiment."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import update

import greenspec
from greenspec.compare import compare_frames
from orchestrator.cli import main
from storage.db import open_db
from storage.models import Experiment
from tests.dashboard.populate import EXPERIMENT, populate

ROOT = Path(__file__).resolve().parents[2]


def cells(rows) -> pd.DataFrame:
    """An export frame from (strategy, k, speedup, lo, hi, acceptance) rows on task t, uncached, greedy, replayed."""
    df = pd.DataFrame(rows, columns=["strategy", "k", "speedup", "speedup_lo", "speedup_hi", "acceptance"])
    return df.assign(task="t", regime="uncached", temperature=0.0, measure="replay", prompts=20)


def test_cells_both_ran_side_by_side_with_differences_and_what_each_ran_alone():
    a = cells(
        [("ngram", 3, 1.50, 1.40, 1.60, 0.30), ("ngram", 5, 1.40, 1.30, 1.50, 0.25), ("lookup", 3, 1.2, 1.1, 1.3, 0.2)]
    )
    b = cells(
        [("ngram", 3, 1.80, 1.70, 1.90, 0.30), ("ngram", 5, 1.45, 1.35, 1.55, 0.25), ("suffix", 3, 2, 1.9, 2.1, 0.4)]
    )
    got = compare_frames(a, b, "home", "laptop").set_index(["strategy", "k"])
    assert list(got.index) == [("ngram", 3), ("ngram", 5)]  # lookup ran on home only, suffix on laptop only
    assert got.attrs["only_a"] == 1 and got.attrs["only_b"] == 1
    assert set(got["a"]) == {"home"} and set(got["b"]) == {"laptop"}
    assert got.loc[("ngram", 3), "speedup_diff"] == pytest.approx(0.30)
    assert got.loc[("ngram", 3), ["speedup_a_lo", "speedup_b_hi"]].tolist() == [1.40, 1.90]
    assert got.loc[("ngram", 3), "apart"]  # [1.40, 1.60] and [1.70, 1.90] miss each other
    assert not got.loc[("ngram", 5), "apart"]  # [1.30, 1.50] and [1.35, 1.55] overlap
    assert got.loc[("ngram", 5), "acceptance_diff"] == pytest.approx(0.0)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('cmp') / 'g.db'}"
    populate(url, seed=0)
    engine, Session = open_db(url, migrate=False)
    with Session.begin() as s:
        s.execute(update(Experiment).where(Experiment.name == EXPERIMENT).values(name="first"))
    engine.dispose()
    populate(url, seed=1)  # the same grid again, other random timings
    return url


def test_export_compare_names_another_experiment(two_runs):
    res = CliRunner().invoke(
        main, ["--db", two_runs, "export", "-e", "first", "--compare", EXPERIMENT, "--format", "csv"]
    )
    assert res.exit_code == 0, res.output
    frame = pd.read_csv(io.StringIO(res.stdout))
    library = greenspec.open_results(two_runs).compare("first", EXPERIMENT)
    assert len(frame) == len(library) > 0 and set(frame["a"]) == {"first"} and set(frame["b"]) == {EXPERIMENT}
    assert frame["speedup_diff"].round(9).tolist() == (library["speedup_b"] - library["speedup_a"]).round(9).tolist()
    assert f"export: {len(frame)} cells both ran; 0 cells of the first only, 0 of {EXPERIMENT} only" in res.stderr
    md = CliRunner().invoke(
        main, ["--db", two_runs, "export", "-e", "first", "--compare", EXPERIMENT, "--format", "markdown"]
    )
    assert md.exit_code == 0 and "speedup_a" in md.stdout and " [" in md.stdout  # intervals in one cell
    missing = CliRunner().invoke(main, ["--db", two_runs, "export", "-e", "first", "--compare", "nope"])
    assert missing.exit_code != 0 and "no experiment 'nope'" in missing.output
    itself = CliRunner().invoke(main, ["--db", two_runs, "export", "-e", "first", "--compare", "first"])
    assert itself.exit_code != 0 and "that is the experiment itself" in itself.output


def test_the_dashboard_compare_page_shows_the_cells_both_ran(two_runs, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("GREENSPEC_DB", two_runs)
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("views/compare.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    caption = next(c.value for c in at.caption if "cells both ran" in c.value)
    both = len(greenspec.open_results(two_runs).compare(EXPERIMENT, "first"))
    assert f"A = **{EXPERIMENT}**, B = **first**: {both} cells both ran; 0 only in A, 0 only in B" in caption
    (table,) = [d for d in at.dataframe if len(d.value) == both]
    assert {"speedup_a", "speedup_b", "speedup_diff", "apart"} <= set(table.value.columns)
