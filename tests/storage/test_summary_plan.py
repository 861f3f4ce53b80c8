"""Storage: the summary's reads stream through its covering index (migration 0017), with no temporary B-tree over
every generation, whichever versions they are filed under; the index's column order after the upgrade and back."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy.dialects import sqlite

from storage.db import MIGRATIONS, make_engine, open_db
from storage.models import SUMMARY_INDEX_COLUMNS
from storage.summary import Versions, group_sums_stmt, latest_generations, prompt_stmt

VERSIONS = {
    "none": None,
    "by strategy": Versions(strategies=frozenset({"plain", "ngram"})),
    "by prompt key": Versions(strategies=frozenset({"plain", "ngram"}), older=frozenset({"old-key"})),
}


def _plan(conn, stmt) -> list[str]:
    sql = str(stmt.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    return [row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")]


@pytest.mark.parametrize("versions", VERSIONS.values(), ids=VERSIONS.keys())
def test_the_summary_reads_need_no_sort_of_the_generations(tmp_path, versions):
    engine, _ = open_db(f"sqlite:///{tmp_path / 's.db'}")
    with engine.connect() as conn:
        for stmt in (latest_generations(1, versions), prompt_stmt(1, versions)):
            plan = _plan(conn, stmt)
            assert not [step for step in plan if "TEMP B-TREE" in step], plan
            assert any("COVERING INDEX ix_generations_summary" in step for step in plan), plan
        plan = _plan(conn, group_sums_stmt(1, versions))
        sorts = [step for step in plan if "TEMP B-TREE" in step]
        # split by prompt key: only the per-version groups (a few hundred rows) are put in order
        assert sorts == ([] if versions is None or not versions.older else ["USE TEMP B-TREE FOR ORDER BY"]), plan


def _index_columns(engine) -> list[str]:
    with engine.connect() as conn:
        return [row[2] for row in conn.exec_driver_sql("PRAGMA index_info('ix_generations_summary')")]


def test_upgrade_to_0017_puts_the_summary_index_in_grouping_order_and_back(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'o.db'}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    for step, revision in ((command.upgrade, "0016"), (command.upgrade, "0017")):
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            step(cfg, revision)
    assert _index_columns(engine) == [*SUMMARY_INDEX_COLUMNS, "accept_hist"]
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0016")
    old = _index_columns(engine)
    assert sorted(old) == sorted([*SUMMARY_INDEX_COLUMNS, "accept_hist"]) and old.index("prompt_index") == 6
    assert old[-3:] == ["measure", "prompt_key", "accept_hist"]
