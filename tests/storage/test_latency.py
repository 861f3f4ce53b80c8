"""The draft_latency table: created by migration 0004, rows stored per experiment name and replaced on re-store."""

from __future__ import annotations

from sqlalchemy import inspect

from storage.db import open_db
from storage.latency import LATENCY_COLUMNS, latency_frame, store_latency

ROW = {
    "strategy": "ngram",
    "draft": "ngram",
    "engine": "ngram",
    "queries": 50,
    "mean_us": 12.5,
    "median_us": 11.0,
    "p95_us": 20.0,
    "min_us": 9.0,
}


def test_store_and_read_back_replacing_earlier_rows(tmp_path):
    engine, Session = open_db(f"sqlite:///{tmp_path / 'l.db'}")
    assert "draft_latency" in inspect(engine).get_table_names()
    with Session() as s:
        store_latency(s, "demo", [ROW, {**ROW, "strategy": "olifant-x", "engine": "timbl"}], prompts=10, repeats=5)
        store_latency(s, "other", [ROW], prompts=1, repeats=1)
        s.commit()
        assert len(latency_frame(s, "demo")) == 2
        store_latency(s, "demo", [{**ROW, "mean_us": 7.0}], prompts=10, repeats=5, host="h")
        s.commit()
        df = latency_frame(s, "demo")
    assert list(df.columns) == LATENCY_COLUMNS
    assert df[["strategy", "mean_us", "prompts", "repeats", "host"]].values.tolist() == [["ngram", 7.0, 10, 5, "h"]]
    with Session() as s:
        assert latency_frame(s, "missing").empty and len(latency_frame(s, "other")) == 1


def test_reading_a_database_without_the_table_gives_no_rows(tmp_path):
    from alembic import command
    from alembic.config import Config

    from storage.db import MIGRATIONS, make_engine

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002")  # a database made before draft_latency existed, read without migrating
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        assert latency_frame(s, "demo").empty
