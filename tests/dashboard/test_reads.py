"""The dashboard's cached reads: database states, texts, references, one generation, the spec."""

from __future__ import annotations

import time

from sqlalchemy import text

from dashboard import reads
from storage.browse import GridPoint, Selection
from storage.db import make_engine, open_db


def test_db_state_for_each_kind_of_database(tmp_path, fixture_db):
    missing = tmp_path / "missing.db"
    assert reads.db_state(f"sqlite:///{missing}") == "missing"
    assert not missing.exists()
    other = tmp_path / "other.db"
    with make_engine(f"sqlite:///{other}").begin() as conn:
        conn.execute(text("CREATE TABLE unrelated (x INTEGER)"))
    assert reads.db_state(f"sqlite:///{other}") == "no_schema"
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    open_db(fresh)
    assert reads.db_state(fresh) == "empty"
    assert reads.db_state(fixture_db) == "ready"


def test_db_url_reads_the_environment(monkeypatch):
    monkeypatch.setenv("GREENSPEC_DB", "sqlite:////tmp/x.db")
    assert reads.db_url() == "sqlite:////tmp/x.db"
    monkeypatch.delenv("GREENSPEC_DB")
    assert reads.db_url() == "sqlite:///greenspec.db"


def test_cached_reads_pickers_generation_reference_and_spec(fixture_db):
    data = reads.version(fixture_db, 1)
    assert data == (60, 60)
    assert reads.options(fixture_db, 1, data)["strategy"] == ["ngram", "olifant-wikitext", "plain"]
    fixed = (("strategy", "ngram"), ("task", "wikitext"))
    assert reads.distinct(fixture_db, 1, data, "k", fixed, Selection()) == [3, 5]
    gen_id = reads.generation_id(fixture_db, 1, data, GridPoint("ngram", "wikitext", 3, "cached", 0))
    gen = reads.generation(fixture_db, gen_id)
    assert (gen["strategy"], gen["k"], gen["regime"], gen["prompt_index"]) == ("ngram", 3, "cached", 0)
    assert len(gen["tokens"]) == gen["n_tokens"]
    assert sum(gen["accepted_per_step"]) + gen["steps"] == gen["n_tokens"]
    assert reads.generation(fixture_db, 10_000) is None
    assert reads.reference(fixture_db, 1, "wikitext", 0)["prompt_text"].startswith("The castle")
    assert reads.spec(fixture_db, 1)["verifier"]["tokenizer"] == "mistral"


def test_table5_runs_in_the_background_once_per_data_version(fixture_db):
    from dashboard import background

    calls = []

    def compute():
        calls.append(1)
        return reads.redundancy(fixture_db, 1)

    key = ("table5-test", fixture_db, 1)
    value, busy = background.latest(key, (60, 60), compute)
    deadline = time.monotonic() + 60
    while busy and time.monotonic() < deadline:
        time.sleep(0.1)
        value, busy = background.latest(key, (60, 60), compute)
    assert not busy and set(value["strategy"]) == {"reference", "plain", "ngram", "olifant-wikitext"}
    assert background.latest(key, (60, 60), compute) == (value, False) and len(calls) == 1  # cached, not recomputed
    stale, busy = background.latest(key, (61, 61), compute)  # new results: the old table meanwhile, a new run going
    assert stale is value and busy
    while busy and time.monotonic() < deadline:
        time.sleep(0.1)
        _, busy = background.latest(key, (61, 61), compute)
    assert len(calls) == 2


def test_background_failure_is_reported_not_retried_in_a_loop():
    from dashboard import background

    def broken():
        raise ValueError("no texts")

    key = ("broken-test",)
    background.latest(key, 1, broken)
    deadline = time.monotonic() + 10
    while background.latest(key, 1, broken)[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert background.latest(key, 1, broken) == (None, False)
    assert background.error(key) == "ValueError: no texts"
