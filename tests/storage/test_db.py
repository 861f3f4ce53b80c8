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
        conn.execute(text("insert into experiments (name, spec_toml, spec_hash, created_at, updated_at) "
                          "values ('old', '', '', '2026-01-01', '2026-01-01')"))
    open_db(url)  # migrates to head
    with engine.connect() as conn:
        assert conn.execute(text("select name from experiments")).scalar() == "old"
        cols = {c["name"] for c in inspect(conn).get_columns("generations")}
    assert "tokens_per_step" in cols


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
