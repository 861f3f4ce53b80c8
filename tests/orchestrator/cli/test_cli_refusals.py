"""One-line refusals before any work, no output over a database or an existing file, true messages.

In-process (click's runner) over a real SQLite file with hand-made results (`tests.storage.known`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from greenspec.outputs import OutputError, check_out_path, is_sqlite_file
from tests.orchestrator.conftest import cli
from tests.storage.known import build

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def known(tmp_path) -> tuple[str, Path]:
    path = tmp_path / "g.db"
    build(f"sqlite:///{path}")
    return f"sqlite:///{path}", path


def refused(code: int, err: str, *words: str) -> None:
    """Exit 2 and one line naming each of `words`, no traceback."""
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("greenspec: error: "), err
    assert "unexpected" not in lines[0] and all(w in lines[0] for w in words), err


def test_output_path_rules(tmp_path):
    db = tmp_path / "g.db"
    sqlite3.connect(db).execute("create table t (x)").connection.close()
    existing = tmp_path / "old.csv"
    existing.write_text("keep me")
    assert is_sqlite_file(db) and not is_sqlite_file(existing) and not is_sqlite_file(tmp_path / "none")
    for path, force, words in (
        (db, True, "SQLite database"),
        (existing, False, "--force"),
        (tmp_path, False, "folder"),
        (tmp_path / "no" / "x.csv", False, "does not exist"),
    ):
        with pytest.raises(OutputError, match=words):
            check_out_path(str(path), "--out", force)
    with pytest.raises(OutputError, match="SQLite database"):  # the --db file itself, before it exists
        check_out_path(str(tmp_path / "new.db"), "--out", True, db_file=tmp_path / "new.db")
    check_out_path(str(existing), "--out", True)
    check_out_path(str(tmp_path / "new.csv"), "--out", False)
    check_out_path("/dev/null", "--out", False)  # a device is written as it is
    assert existing.read_text() == "keep me"


def test_export_never_overwrites_the_database_or_a_file_unasked(known, tmp_path, monkeypatch):
    url, path = known
    before = path.read_bytes()
    monkeypatch.chdir(path.parent)
    refused(*cli("--db", url, "export", "--out", str(path), "--force")[::2], "SQLite database")
    refused(*cli("--db", "sqlite:///g.db", "export", "--out", "g.db")[::2], "SQLite database")
    assert path.read_bytes() == before
    out = tmp_path / "t.csv"
    out.write_text("old")
    refused(*cli("--db", url, "export", "--out", str(out))[::2], "exists", "--force")
    assert out.read_text() == "old"
    code, _, err = cli("--db", url, "export", "--out", str(out), "--force")
    assert code == 0 and out.read_text().startswith("strategy,"), err


def test_export_to_a_full_device_is_one_line(known):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    refused(*cli("--db", known[0], "export", "--out", "/dev/full")[::2], "/dev/full", "cannot write")


def test_train_and_latency_check_out_before_any_work(known, tmp_path):
    url, path = known
    before = path.read_bytes()
    spec = str(tmp_path / "no-such-spec.toml")  # never read: the --out check comes first
    refused(*cli("--db", url, "train", spec, "--corpus", "c", "--out", str(path))[::2], "SQLite database")
    refused(*cli("--db", url, "latency", spec, "--out", str(tmp_path / "nodir" / "l.csv"))[::2], "does not exist")
    assert path.read_bytes() == before


def test_train_out_in_a_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        refused(
            *cli("train", str(tmp_path / "s.toml"), "--corpus", "c", "--out", str(ro / "x.igtree"))[::2], "not writable"
        )
    finally:
        ro.chmod(0o755)


def test_memory_gb_must_be_finite(tmp_path):
    refused(
        *cli("train", str(tmp_path / "s.toml"), "--corpus", "c", "--memory-gb", "inf")[::2], "--memory-gb", "finite"
    )


def test_dashboard_port_out_of_range(known):
    for port in ("70000", "0", "-1"):
        refused(*cli("--db", known[0], "dashboard", "--port", port)[::2], f"--port {port}", "65535")


def test_resume_and_retry_on_a_mistyped_path_create_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    for cmd in (["resume"], ["retry", "--failed"]):
        refused(*cli("--db", url, *cmd)[::2], "no database at", "typo.db")
    assert not (tmp_path / "typo.db").exists()


def test_unknown_experiment_is_named(known):
    for cmd in (
        ["export", "-e", "nope"],
        ["export", "-e", "nope", "--compare", "paper"],
        ["status", "-e", "nope"],
        ["resume", "-e", "nope"],
        ["retry", "--failed", "-e", "nope"],
    ):
        refused(*cli("--db", known[0], *cmd)[::2], "no experiment 'nope'", "known: ")


def test_a_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("create table cells (id integer primary key, state text)")
    con.execute("insert into cells (state) values ('done')")
    con.commit()
    con.close()
    for cmd in (["status"], ["status", "--json"], ["export"]):
        refused(*cli("--db", f"sqlite:///{path}", *cmd)[::2], "not a greenspec database", "cells")


def test_status_prints_no_nan_and_whole_k(known):
    url, path = known
    con = sqlite3.connect(path)
    con.execute(
        "insert into cells (experiment_id, key, kind, state, corpus, params, attempts, error, created_at) "
        "values (1, 'tr', 'train', 'failed', 'pydoc', '{}', 2, 'MemoryError: boom', datetime('now'))"
    )
    con.execute("update cells set state = 'failed', error = 'RuntimeError: x' where key = 's4'")
    con.commit()
    con.close()
    code, out, err = cli("--db", url, "status")
    assert code == 0, err
    assert "nan" not in out and "k=3.0" not in out and "k=2.0" not in out
    assert "train pydoc: MemoryError: boom" in out and "sweep ngram t prompt 0 k=3 uncached: RuntimeError: x" in out


def test_status_json_counts_every_cell_kind(known):
    url, path = known
    con = sqlite3.connect(path)
    for i, kind in enumerate(("datastore", "label", "distill")):
        con.execute(
            "insert into cells (experiment_id, key, kind, state, corpus, params, attempts, created_at) "
            f"values (1, 'a{i}', '{kind}', 'done', 'c', '{{}}', 1, datetime('now'))"
        )
    con.commit()
    con.close()
    code, out, _ = cli("--db", url, "status", "--json")
    data = json.loads(out)
    kinds = ("train", "datastore", "distill", "label", "reference", "sweep")
    assert code == 0 and all(k in data for k in kinds)
    assert sum(sum(data[k].values()) for k in kinds) == sum(data["cells"].values()) == 13
