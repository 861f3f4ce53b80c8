"""Browsing reads: data version, DISTINCT options, one generation by grid point, accepted-length sums, Table 5 texts."""

from __future__ import annotations

import pytest

from storage import browse
from storage.browse import GridPoint, Selection
from storage.db import open_db
from tests.storage.known import build


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('known') / 'known.db'}"
    build(url)
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        yield s


def test_data_version_is_last_id_and_count(session):
    assert browse.data_version(session, 1) == (7, 7)
    assert browse.data_version(session, 99) == (0, 0)


def test_distinct_values_cascade(session):
    assert browse.distinct_values(session, 1, "strategy") == ["ngram", "plain"]
    assert browse.distinct_values(session, 1, "k", {"strategy": "ngram"}) == [2, 3]
    assert browse.distinct_values(session, 1, "k", {"strategy": "ngram", "regime": "cached"}) == [2]
    assert browse.distinct_values(session, 1, "prompt_index", {"strategy": "ngram", "k": 3}) == [0]
    assert browse.distinct_values(session, 1, "k", selection=Selection(ks=(3,))) == [0, 3]  # plain survives a k filter


def test_generation_by_grid_point_and_its_detail(session):
    gen_id = browse.generation_id(session, 1, GridPoint("ngram", "t", 2, "cached", 0))
    assert gen_id == 7
    gen = browse.generation_detail(session, gen_id)
    assert gen["accepted_per_step"] == [2, 0, 0, 2, 1, 0, 2] and gen["fastpath_rejects"] == 2
    assert browse.generation_id(session, 1, GridPoint("ngram", "t", 3, "cached", 0)) is None
    assert browse.generation_detail(session, 999) is None
    assert browse.reference(session, 1, "t", 1)["text"] == "one two three four five"


def test_a_grid_point_at_another_temperature_is_another_generation(tmp_path):
    """Greedy and sampled generations share strategy, task, k, regime and prompt: the temperature tells them apart."""
    from sqlalchemy import insert, select

    from storage.models import Cell, Generation

    url = f"sqlite:///{tmp_path / 'known.db'}"
    build(url)
    engine, Session = open_db(url, migrate=False)
    with engine.begin() as conn:
        cols = [c for c in Generation.__table__.columns if c.name not in ("id", "cell_id", "temperature")]
        row = conn.execute(select(*cols).where(Generation.id == 7)).mappings().one()
        cell = conn.execute(
            insert(Cell).values(experiment_id=1, key="sampled", kind="sweep", state="done", params={})
        ).inserted_primary_key[0]
        conn.execute(insert(Generation).values(**row, cell_id=cell, temperature=0.8))
    point = dict(strategy="ngram", task="t", k=2, regime="cached", prompt_index=0)
    with Session() as s:
        assert browse.generation_id(s, 1, GridPoint(**point, temperature=0.0)) == 7
        assert browse.generation_id(s, 1, GridPoint(**point, temperature=0.8)) == 8
    engine.dispose()


def test_accepted_length_counts_sum_histograms_in_sql(session):
    counts = browse.accepted_length_counts(session, 1, 3)
    k2 = counts[counts["k"] == 2]["rounds"].tolist()
    assert k2 == [9, 5, 5]  # [2,1,2] + [4,3,0] + [3,1,3] over the three ngram k=2 generations
    assert counts[counts["k"] == 3]["rounds"].tolist() == [2, 0, 0, 2]
    cached = browse.accepted_length_counts(session, 1, 3, Selection(regimes=("cached",)))
    assert cached["rounds"].tolist() == [3, 1, 3] and set(cached["k"]) == {2}


def test_redundancy_texts_one_per_strategy_and_prompt(session):
    texts = browse.redundancy_texts(session, 1)
    assert sorted(zip(texts["strategy"], texts["prompt_index"])) == [
        ("ngram", 0),
        ("ngram", 1),
        ("plain", 0),
        ("plain", 1),
    ]
    assert len(browse.references_frame(session, 1)) == 2
