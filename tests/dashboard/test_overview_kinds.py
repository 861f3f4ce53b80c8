"""The Overview counts a replayed run's cells (replay cells by state beside the timed, reference and training ones)
and shows the spec's `[experiment] notes` and `tags`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import insert, update
from streamlit.testing.v1 import AppTest

from storage.db import open_db
from storage.models import Cell, Experiment

NOTED = '[experiment]\nname = "fixture"\nnotes = """rerun of the cached regime\non a quiet machine"""\ntags = ["gpu", "baseline"]\n'
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def test_overview_counts_replayed_cells(monkeypatch, fixture_db, tmp_path):
    db = tmp_path / "replayed.db"
    with sqlite3.connect(fixture_db.removeprefix("sqlite:///")) as src, sqlite3.connect(db) as dst:
        src.backup(dst)  # the fixture's database, its WAL included
    url = f"sqlite:///{db}"
    engine, _ = open_db(url, migrate=False)
    with engine.begin() as conn:
        for i, state in enumerate(["done"] * 5 + ["pending"] * 2):
            cell = {"experiment_id": 1, "key": f"replay-{i}", "kind": "replay", "state": state, "strategy": "ngram"}
            conn.execute(insert(Cell).values(**cell, task="wikitext", k=3, regime="cached", prompt_index=i, params={}))
        conn.execute(update(Experiment).values(spec_toml=NOTED))
    engine.dispose()
    monkeypatch.setenv("GREENSPEC_DB", url)
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["cells"], metrics["done"]) == ("75", "72")
    text = "\n".join(m.value for m in at.markdown)
    assert "**replay** 5 done, 0 running, 2 pending, 0 failed" in text
    assert "Experiment **fixture** `gpu` `baseline`" in at.caption[0].value + at.caption[1].value
    assert [i.value for i in at.info] == ["rerun of the cached regime\non a quiet machine"]
    assert text.index("**training**") < text.index("**reference**") < text.index("**replay**") < text.index("**timed**")
