"""Storage: migrations from empty and from the first schema, SQLite pragmas, read-only checks."""

from __future__ import annotations

import sqlite3

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from storage.db import MIGRATIONS, DatabaseError, has_schema, make_engine, open_db, sqlite_path
from storage.models import Base


def test_migrations_create_the_models_schema(tmp_path):
    engine, _ = open_db(f"sqlite:///{tmp_path / 'a.db'}")
    insp = inspect(engine)
    for table in Base.metadata.tables.values():
        assert {c["name"] for c in insp.get_columns(table.name)} == {c.name for c in table.columns}, table.name
    with engine.connect() as conn:
        head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
        assert conn.execute(text("select version_num from alembic_version")).scalar() == head


def test_upgrade_from_first_revision_keeps_rows(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into experiments (name, spec_toml, spec_hash, created_at, updated_at) "
                "values ('old', '', '', '2026-01-01', '2026-01-01')"
            )
        )
    open_db(url)  # migrates to head
    with engine.connect() as conn:
        assert conn.execute(text("select name from experiments")).scalar() == "old"
        cols = {c["name"] for c in inspect(conn).get_columns("generations")}
    assert "tokens_per_step" in cols


GEN_0001 = {  # a generation row as schema 0001 stored it (no tokens_per_step)
    "id": 1,
    "cell_id": 1,
    "experiment_id": 1,
    "strategy": "ngram",
    "draft": "ngram",
    "task": "t",
    "prompt_index": 0,
    "k": 2,
    "regime": "cached",
    "n_prompt_tokens": 5,
    "n_tokens": 4,
    "steps": 3,
    "drafted": 4,
    "accepted": 1,
    "acceptance": 0.25,
    "mal": 1 / 3,
    "accept_hist": "[2, 1, 0]",
    "accepted_per_step": "[0, 1, 0]",
    "fastpath_rejects": 2,
    "wall_s": 2.0,
    "draft_s": 0.5,
    "verify_s": 1.5,
    "tokens_per_s": 2.0,
    "started_at": 10.0,
    "ended_at": 12.0,
    "energy_j": 8.0,
    "mean_power_w": 4.0,
    "j_per_100_tokens": 200.0,
    "tokens_per_j": 0.5,
    "power_source": "estimate",
    "power_measured": False,
    "rouge_l": 0.75,
    "exact_match": False,
    "bridged": False,
    "stopped": "max_new_tokens",
    "device": "cpu",
    "tokens": "[5, 6, 7, 8]",
    "text": "old text",
}


def _upgrade(engine, revision: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def test_upgrade_0001_to_0002_to_head_keeps_generations(tmp_path):
    from analysis.summary import summary_frame
    from storage.queries import generations_frame

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    _upgrade(engine, "0001")
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into experiments (id, name, spec_toml, spec_hash, created_at, updated_at) "
                "values (1, 'old', '', '', '2026-01-01', '2026-01-01')"
            )
        )
        conn.execute(
            text(
                "insert into cells (id, experiment_id, key, kind, state, strategy, draft, task, prompt_index, "
                "k, regime, params, attempts, created_at) values (1, 1, 'c1', 'sweep', 'done', 'ngram', "
                "'ngram', 't', 0, 2, 'cached', '{}', 1, '2026-01-01')"
            )
        )
        cols = ", ".join(GEN_0001)
        conn.execute(
            text(f"insert into generations ({cols}) values ({', '.join(':' + c for c in GEN_0001)})"), GEN_0001
        )
    _upgrade(engine, "0002")
    with engine.connect() as conn:
        row = conn.execute(text("select tokens, accepted_per_step, tokens_per_step, text from generations")).one()
    assert (row.tokens, row.accepted_per_step, row.tokens_per_step, row.text) == (
        "[5, 6, 7, 8]",
        "[0, 1, 0]",
        None,
        "old text",
    )
    _, Session = open_db(url)  # the rest of the way to head
    with Session() as s:
        gens = generations_frame(s)
        table = summary_frame(s, "old")
    assert gens.loc[0, "accept_hist"] == [2, 1, 0] and gens.loc[0, "energy_j"] == 8.0
    row = table.iloc[0]
    # one generation: 4 tokens / 2.0 s = 2.0 tokens/s; 1 accepted of 4 drafted = 0.25; 1 accepted / 3 steps
    assert (row["strategy"], row["k"], row["regime"], row["n_tokens"]) == ("ngram", 2, "cached", 4)
    assert row["tokens_per_s"] == 2.0 and row["acceptance"] == 0.25 and row["mal"] == pytest.approx(1 / 3)
    assert row["rouge_l"] == 0.75 and row["exact_match"] == 0.0 and row["j_per_100_tokens"] == 200.0  # 8 J / 4 * 100


def test_sqlite_runs_in_wal_with_busy_timeout(tmp_path):
    engine, _ = open_db(f"sqlite:///{tmp_path / 'w.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_bad_url_is_one_line():
    with pytest.raises(DatabaseError, match="not a SQLAlchemy URL"):
        make_engine("not a url at all")


def test_schema_check_and_paths(tmp_path):
    path = tmp_path / "plain.db"
    sqlite3.connect(path).close()
    assert not has_schema(make_engine(f"sqlite:///{path}"))
    assert sqlite_path(f"sqlite:///{path}") == path
    assert sqlite_path("sqlite://") is None and sqlite_path("postgresql://u@h/db") is None


def test_upgrade_to_0003_backfills_rounds_and_first_accepted(tmp_path):
    url = f"sqlite:///{tmp_path / 'old2.db'}"
    engine = make_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002")
    cols = (
        "experiment_id, cell_id, strategy, draft, task, prompt_index, k, regime, n_prompt_tokens, n_tokens, steps, "
        "drafted, accepted, mal, accept_hist, accepted_per_step, fastpath_rejects, wall_s, draft_s, verify_s, "
        "tokens_per_s, started_at, ended_at, bridged, stopped, device, tokens, text"
    )
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into experiments (name, spec_toml, spec_hash, created_at, updated_at) "
                "values ('old', '', '', '2026-01-01', '2026-01-01')"
            )
        )
        conn.execute(
            text(
                "insert into cells (experiment_id, key, kind, state, params, attempts, created_at) "
                "values (1, 'a', 'sweep', 'done', '{}', 1, '2026-01-01')"
            )
        )
        conn.execute(
            text(
                f"insert into generations ({cols}) values (1, 1, 'ngram', 'ngram', 't', 0, 2, 'uncached', "
                "3, 10, 5, 10, 5, 1.0, '[2, 1, 2]', '[2, 0, 2, 1, 0]', 0, 1.0, 0.0, 1.0, 10.0, 0, 1, 0, "
                "'max_new_tokens', 'cpu', '[]', '')"
            )
        )
    open_db(url)  # migrates to head
    with engine.connect() as conn:
        assert conn.execute(text("select rounds, first_accepted from generations")).one() == (5, 3)  # 5 - hist[0] 2
        indexes = {row[1] for row in conn.exec_driver_sql("PRAGMA index_list('generations')")}
    assert {"ix_generations_summary", "ix_generations_experiment_id"} <= indexes


def test_insert_fills_rounds_and_first_accepted(tmp_path):
    from tests.storage.known import build

    url = f"sqlite:///{tmp_path / 'k.db'}"
    build(url)  # Core inserts that name neither column, as the driver's writes do
    with make_engine(url).connect() as conn:
        rows = conn.execute(text("select rounds, first_accepted from generations order by id")).all()
    assert rows[2] == (5, 3) and rows[6] == (7, 4)  # [2,0,2,1,0]: 5 rounds, 2 empty; [2,0,0,2,1,0,2]: 7, 3 empty


KILLED_MID_MIGRATION = """
import sys, time
from sqlalchemy import event
import storage.db as db

real = db._transactional_sqlite

def paused(engine):
    eng = real(engine)

    @event.listens_for(eng, "before_cursor_execute")
    def pause(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("CREATE TABLE GENERATIONS"):  # some tables are created by now
            print("paused", flush=True)
            time.sleep(600)
    return eng

db._transactional_sqlite = paused
db.open_db(sys.argv[1])
"""


def test_a_driver_killed_mid_migration_leaves_no_half_schema(tmp_path):
    """kill -9 while a new SQLite file is being migrated: nothing half-made stays, and the next open migrates."""
    import subprocess
    import sys
    from pathlib import Path

    url = f"sqlite:///{tmp_path / 'g.db'}"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_MID_MIGRATION, url], cwd=root, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "paused"
        with sqlite3.connect(tmp_path / "g.db", timeout=0.1) as conn:  # the half-made tables are not visible
            assert conn.execute("select count(*) from sqlite_master").fetchone()[0] == 0
    finally:
        proc.kill()
        proc.wait()
    with sqlite3.connect(tmp_path / "g.db") as conn:  # the killed transaction left nothing behind
        assert conn.execute("select name from sqlite_master where type = 'table'").fetchall() == []
    engine, _ = open_db(url)
    assert has_schema(engine) and "alembic_version" in inspect(engine).get_table_names()
    engine.dispose()
