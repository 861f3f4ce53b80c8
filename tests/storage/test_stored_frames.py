"""Storage: frames kept in the database at a data version (`storage.stored_frames`, migration 0019), on SQLite and
PostgreSQL: read back bit for bit, only at their version, one per experiment and name, and a reader of a database no
run has migrated yet reads none."""

from __future__ import annotations

import json
import math

import pandas as pd
from alembic import command
from alembic.config import Config
from sqlalchemy import func, insert, inspect, select

from storage.db import MIGRATIONS, make_engine, open_db, open_reader
from storage.models import Cell, CostModel, Experiment, Reference, StoredFrame
from storage.stored_frames import drop_frames, read_frame, rows_version, stored_versions, write_frame


def _frame() -> pd.DataFrame:
    """Every kind of column a summary holds: text with a blank, int, float with NaN and a value with no short
    decimal form, booleans with a blank, all blank; and attrs."""
    df = pd.DataFrame(
        {
            "strategy": ["ngram", "plain", None],
            "k": [2, 0, 5],
            "tokens_per_s": [0.1 + 0.2, math.nan, 1e-300],
            "power_measured": [True, None, False],
            "note": [None, None, None],
        }
    )
    df.attrs["model_error"] = {"cached": 0.031}
    return df


def _experiment(Session) -> int:
    with Session() as s:
        exp_id = s.execute(insert(Experiment).values(name="e", spec_toml="", spec_hash="")).inserted_primary_key[0]
        s.commit()
    return exp_id


def _cost_model(exp_id: int) -> CostModel:
    """A round-cost table measured for the experiment (tests/storage/test_validation.py's)."""
    from tests.storage.test_validation import SAMPLES, TABLE

    costs = json.loads(TABLE.to_json())
    return CostModel(experiment_id=exp_id, verifier="v", device="d", costs=costs, samples=list(SAMPLES), measure_s=1.0)


def test_a_frame_reads_back_bit_for_bit_at_its_version_only(db_url):
    _, Session = open_db(db_url)
    exp_id = _experiment(Session)
    df = _frame()
    with Session() as s:
        write_frame(s, exp_id, "summary", "v1", df)
        s.commit()
    with Session() as s:
        back = read_frame(s, exp_id, "summary", "v1")
        assert read_frame(s, exp_id, "summary", "v2") is None  # stored at another version: not shown
        assert read_frame(s, exp_id, "summary-pooled", "v1") is None
    pd.testing.assert_frame_equal(back, df)
    assert back.to_csv() == df.to_csv() and back.attrs == df.attrs
    assert back["tokens_per_s"].iloc[0] == 0.1 + 0.2  # the same double, not a rounded one


def test_a_frame_stored_again_replaces_the_one_before_and_dropping_removes_them(db_url):
    _, Session = open_db(db_url)
    exp_id = _experiment(Session)
    with Session() as s:
        write_frame(s, exp_id, "summary", "v1", _frame())
        write_frame(s, exp_id, "summary-pooled", "v1", _frame())
        s.commit()
        write_frame(s, exp_id, "summary", "v2", _frame().head(1))
        s.commit()
        assert stored_versions(s, exp_id) == {"summary": "v2", "summary-pooled": "v1"}
        assert len(read_frame(s, exp_id, "summary", "v2")) == 1 and read_frame(s, exp_id, "summary", "v1") is None
        assert drop_frames(s, exp_id) == 2
        s.commit()
        assert s.scalar(select(func.count()).select_from(StoredFrame)) == 0


def test_the_rows_version_moves_with_a_new_cost_table_or_reference(tmp_path):
    from tests.storage.known import EXPERIMENT, build

    url = f"sqlite:///{tmp_path / 'k.db'}"
    build(url)
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        exp_id = s.scalar(select(Experiment.id).where(Experiment.name == EXPERIMENT))
        before = rows_version(s, exp_id)
        s.add(_cost_model(exp_id))
        s.commit()
        with_table = rows_version(s, exp_id)
        cell = Cell(
            experiment_id=exp_id, key="ref-9", kind="reference", state="done", task="t", prompt_index=9, params={}
        )
        s.add(cell)
        s.flush()
        ref = dict(task="t", prompt_index=9, prompt_text="p", prompt_tokens=[1], tokens=[2], text="x", wall_s=1.0)
        s.add(Reference(cell_id=cell.id, experiment_id=exp_id, **ref))
        s.commit()
        assert len({before, with_table, rows_version(s, exp_id)}) == 3  # each change, another version
    assert before.startswith("g") and ".c0" in before  # no table yet


def test_upgrade_to_0019_adds_the_table_and_a_reader_of_an_older_schema_reads_none(tmp_path):
    url = f"sqlite:///{tmp_path / 'o.db'}"
    engine = make_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0018")
        conn.execute(insert(Experiment).values(name="e", spec_toml="", spec_hash=""))
    with open_reader(url)() as s:  # a new greenspec reading a database no run has migrated
        assert read_frame(s, 1, "summary", "v") is None and stored_versions(s, 1) == {}
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0019")
    assert "stored_frames" in inspect(engine).get_table_names()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0018")
    assert "stored_frames" not in inspect(engine).get_table_names()
    engine.dispose()


def test_a_reader_reads_a_stored_frame_through_its_read_only_engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine, Session = open_db(url)
    exp_id = _experiment(Session)
    with Session() as s:
        write_frame(s, exp_id, "summary", "v1", _frame())
        s.commit()
    engine.dispose()
    with open_reader(url)() as s:
        pd.testing.assert_frame_equal(read_frame(s, exp_id, "summary", "v1"), _frame())
