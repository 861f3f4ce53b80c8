"""The dashboard over a finished run's database shows the summary the run stored as it ended (no generation read, no
bootstrap), the same table as one computed from the rows; a generation stored after it makes the pages compute
their own again on the next render, never showing the stale one."""

from __future__ import annotations

import sqlite3

from sqlalchemy import insert, select

from dashboard import reads
from orchestrator.run.summaries import keep_summaries
from storage.db import open_db
from storage.models import Cell, Generation
from tests.dashboard.populate import populate
from tests.dashboard.test_app import _app, _open

PAGES = ("throughput", "acceptance", "energy", "paper")


def _results(at):
    """The overview's "Results so far" table."""
    return at.dataframe[1].value


def _prompts(at) -> int:
    """The prompts of ngram's pubmed k=3 uncached cell in the overview's results."""
    r = _results(at)
    row = r[(r["strategy"] == "ngram") & (r["task"] == "pubmed") & (r["k"] == 3) & (r["regime"] == "uncached")]
    return int(row["prompts"].iloc[0])


def _add_generation(url: str) -> None:
    """ngram's pubmed k=3 uncached generation of prompt 0 stored again as prompt 3 (a cell run after the end)."""
    engine, _ = open_db(url, migrate=False)
    with engine.begin() as conn:
        cols = [c for c in Generation.__table__.columns if c.name not in ("id", "cell_id", "prompt_index")]
        where = (Generation.strategy == "ngram", Generation.task == "pubmed", Generation.k == 3)
        row = conn.execute(select(*cols).where(*where, Generation.regime == "uncached")).mappings().first()
        cell = dict(strategy="ngram", task="pubmed", k=3, regime="uncached", prompt_index=3, params={})
        cell_id = conn.execute(
            insert(Cell).values(experiment_id=1, key="after", kind="sweep", state="done", **cell)
        ).inserted_primary_key[0]
        conn.execute(insert(Generation).values(**row, cell_id=cell_id, prompt_index=3))
    engine.dispose()


def test_the_pages_show_the_stored_summary_until_a_generation_is_added(monkeypatch, tmp_path):
    url, bare = f"sqlite:///{tmp_path / 'g.db'}", f"sqlite:///{tmp_path / 'bare.db'}"
    populate(url)
    with sqlite3.connect(tmp_path / "g.db") as src, sqlite3.connect(tmp_path / "bare.db") as dst:
        src.backup(dst)  # the same rows (the writer's -wal included), no summary stored
    engine, Session = open_db(url)
    assert keep_summaries(Session, 1)
    engine.dispose()
    computed = []
    real = reads.summarize
    monkeypatch.setattr(reads, "summarize", lambda *a, **kw: computed.append(a) or real(*a, **kw))
    expected = _results(_app(monkeypatch, bare))
    assert len(computed) == 1  # the bare database's summary: computed from its rows
    at = _app(monkeypatch, url)
    assert _results(at).equals(expected) and _prompts(at) == 3
    for page in PAGES:
        _open(at, page)
    assert len(computed) == 1  # every page of the finished run's database: its stored summary
    _add_generation(url)
    _open(at, "overview")
    assert _prompts(at) == 4 and len(computed) == 2  # stale: computed again, with the new generation


def test_the_sidebar_pickers_and_accepted_lengths_read_from_the_stored_frames_are_the_computed_ones(tmp_path):
    from storage.browse import Selection, accepted_length_counts

    url, bare = f"sqlite:///{tmp_path / 'g.db'}", f"sqlite:///{tmp_path / 'bare.db'}"
    populate(url)
    with sqlite3.connect(tmp_path / "g.db") as src, sqlite3.connect(tmp_path / "bare.db") as dst:
        src.backup(dst)
    engine, Session = open_db(url)
    assert keep_summaries(Session, 1)
    data = reads.version(url, 1)
    assert reads.options(url, 1, data) == reads.options(bare, 1, data)
    picks = [("strategy", ()), ("task", (("strategy", "ngram"),)), ("k", (("strategy", "ngram"), ("task", "pubmed")))]
    for sel in (Selection(), Selection(regimes=("cached",), ks=(5,))):
        for column, fixed in picks:  # the cascading pickers, read off the stored summary and from the generations
            assert reads.distinct(url, 1, data, column, fixed, sel) == reads.distinct(bare, 1, data, column, fixed, sel)
    assert reads.distinct(url, 1, data, "k", picks[2][1], Selection()) == [3, 5]
    selections = [Selection(), Selection(regimes=("cached",), ks=(3,)), Selection(tasks=("pubmed",), temperature=0.0)]
    with Session() as s:
        for sel in selections:
            counts = reads.accepted_lengths(url, 1, data, 5, sel)
            assert counts.equals(reads.accepted_lengths(bare, 1, data, 5, sel))
            assert counts.equals(accepted_length_counts(s, 1, 5, sel))  # summed in SQL over the selection alone
            assert counts["rounds"].sum() > 0
    engine.dispose()
