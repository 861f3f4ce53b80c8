"""The Cost model page: the experiment's stored round-cost table (read from the database, so a copied database shows
it) as a chart and tables with the prediction error per regime and width band, or a hint when none was measured."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from storage import store
from storage.cell_spec import CellSpec
from storage.db import open_db
from storage.queries import experiment_id
from tests.storage.test_validation import CACHED, TABLE, add_generation, cell_id, record

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60


def open_page(url: str, cache: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("GREENSPEC_DB", url)
    monkeypatch.setenv("GREENSPEC_CACHE", str(cache))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.switch_page("views/costs.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def measured_db(fixture_db, tmp_path) -> str:
    """A copy of the fixture database (elsewhere on disk) whose newest experiment has a cost model and validated
    generations."""
    path = tmp_path / "copied" / "measured.db"
    path.parent.mkdir()
    with sqlite3.connect(fixture_db.removeprefix("sqlite:///")) as src, sqlite3.connect(path) as dst:
        src.backup(dst)  # the whole database, whatever its journal holds
    url = f"sqlite:///{path}"
    _, Session = open_db(url)
    with Session() as s:
        exp = experiment_id(s, None)
        store.store_cost_model(s, cell_id(s, exp, CellSpec(key="cost", kind="cost_model")), record())
        for strategy, k, prompt, timed_s, replay_s in CACHED:
            add_generation(s, exp, strategy, k, "cached", prompt, "timed", timed_s)
            add_generation(s, exp, strategy, k, "cached", prompt, "replay", replay_s, predicted=replay_s)
        s.commit()
    return url


def test_cost_page_shows_the_experiments_table_from_the_database(measured_db, tmp_path, monkeypatch):
    at = open_page(measured_db, tmp_path / "empty-cache", monkeypatch)
    assert at.title[0].value == "Cost model"
    caption = at.caption[1].value
    assert "smollm2-135m:torch.float32" in caption and "250.0 J" in caption and "threads 2" in caption
    rounds, costs, errors = (at.dataframe[i].value for i in range(3))
    assert len(rounds) == 4  # the record's four measured rows and contexts
    row = rounds.set_index(["kind", "n", "context"]).loc[("chain", 0, 76)]
    assert row["median_ms"] == pytest.approx(38.0) and row["rounds"] == 2
    assert set(costs["regime"]) == {"cached"} and len(costs) == 9
    cached = costs.set_index("n")
    curve = TABLE.curve("cached", 76, 8)
    assert cached.loc[3, "round_ms"] == pytest.approx(curve.seconds[3] * 1e3)
    assert cached.loc[3, "break_even"] == pytest.approx(curve.break_even(3))
    overall = errors[errors["band"] == "all"]
    assert list(overall["regime"]) == ["cached"]
    assert overall.iloc[0]["pairs"] == 12 and overall.iloc[0]["median_error"] == pytest.approx(0.1)
    assert overall.iloc[0]["spearman"] == pytest.approx(0.5)
    assert set(errors["band"]) == {"all", "plain", "k 2-4"}


def test_cost_page_without_a_model_says_how_to_get_one(fixture_db, tmp_path, monkeypatch):
    at = open_page(fixture_db, tmp_path / "empty", monkeypatch)
    assert "cost model cell measures one" in at.info[0].value
