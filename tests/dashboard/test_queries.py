"""The dashboard's read-only queries: database states, texts, references, one generation, the spec."""

from __future__ import annotations

from sqlalchemy import text

from dashboard import queries
from storage.db import make_engine, open_db


def test_db_state_for_each_kind_of_database(tmp_path, fixture_db):
    missing = tmp_path / "missing.db"
    assert queries.db_state(f"sqlite:///{missing}") == "missing"
    assert not missing.exists()
    other = tmp_path / "other.db"
    with make_engine(f"sqlite:///{other}").begin() as conn:
        conn.execute(text("CREATE TABLE unrelated (x INTEGER)"))
    assert queries.db_state(f"sqlite:///{other}") == "no_schema"
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    open_db(fresh)
    assert queries.db_state(fresh) == "empty"
    assert queries.db_state(fixture_db) == "ready"


def test_db_url_reads_the_environment(monkeypatch):
    monkeypatch.setenv("GREENSPEC_DB", "sqlite:////tmp/x.db")
    assert queries.db_url() == "sqlite:////tmp/x.db"
    monkeypatch.delenv("GREENSPEC_DB")
    assert queries.db_url() == "sqlite:///greenspec.db"


def test_texts_references_generation_and_spec(fixture_db):
    texts = queries.texts(fixture_db, 1)
    assert len(texts) == 60 and texts["text"].str.len().gt(50).all()
    refs = queries.references(fixture_db, 1)
    assert len(refs) == 6 and set(refs["task"]) == {"wikitext", "pubmed"}
    gen = queries.generation(fixture_db, int(texts["id"].iloc[3]))
    assert len(gen["tokens"]) == gen["n_tokens"]
    assert sum(gen["accepted_per_step"]) + gen["steps"] == gen["n_tokens"]
    assert queries.generation(fixture_db, 10_000) is None
    assert queries.spec(fixture_db, 1)["verifier"]["tokenizer"] == "mistral"
