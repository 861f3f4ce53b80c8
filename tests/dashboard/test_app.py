"""The app rendered by Streamlit's AppTest over the fixture database, a live one, and empty ones."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from storage.db import open_db
from tests.dashboard.populate import EXPERIMENT, populate

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60  # first run imports plotly and pandas' Styler; the Texts page loads the tokenizer


def _app(monkeypatch, url: str) -> AppTest:
    monkeypatch.setenv("GREENSPEC_DB", url)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _open(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"views/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _charts(at: AppTest) -> list:
    return list(at.get("plotly_chart"))


def _multiselect(at: AppTest, key: str):
    """A multiselect by key (`at.multiselect` misses these sidebar widgets in Streamlit 1.67)."""
    return next(w for w in at.get("multiselect") if w.key == key)


def _text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(h.value for h in at.subheader)


@pytest.fixture(scope="module")
def app(fixture_db):
    """One AppTest session over the fixture database, shared by the page tests (as a browser tab would be)."""
    with pytest.MonkeyPatch.context() as mp:
        yield _app(mp, fixture_db)


def test_overview_lists_experiment_queue_failures_and_ibases(app):
    at = _open(app, "overview")
    assert at.title[0].value == "Overview"
    experiments, results, failures, ibases = (d.value for d in at.dataframe)
    assert list(experiments["name"]) == [EXPERIMENT]
    assert {"plain", "ngram", "olifant-wikitext"} <= set(results["strategy"])
    assert failures["error"].iloc[0].startswith("DraftError")
    assert ibases["nodes after prune"].iloc[0] == 121_850
    assert (ibases["partitions"].iloc[0], ibases["peak RSS (GB)"].iloc[0]) == (3, 0.93)
    assert ibases["energy attributed by"].iloc[0] == "cpu-time share"
    assert len(_charts(at)) == 1  # queue by state
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["cells"], metrics["done"], metrics["failed"]) == ("68", "67", "1")  # every kind, not sweeps only
    assert "**timed** 60 done, 0 running, 0 pending, 1 failed" in _text(at)
    assert len(at.download_button) == 8  # CSV + LaTeX for each of the four tables


def test_throughput_tables_and_figure(app):
    at = _open(app, "throughput")
    assert [t.value.columns[0] for t in at.table] == ["strategy", "strategy"]
    table1 = at.table[0].value
    assert "wikitext · speedup" in table1.columns and len(table1) == 5
    assert {
        "Table 1: throughput and speedup over plain, uncached",
        "Table 2: throughput and speedup over plain, cached",
    } <= {h.value for h in at.subheader}
    assert len(_charts(at)) == 1
    assert {b.label for b in at.download_button} == {"CSV", "LaTeX"} and len(at.download_button) == 4


def test_acceptance_tables_break_even_and_histograms(app):
    at = _open(app, "acceptance")
    assert len(at.table) == 2 and "plain" not in set(at.table[0].value["strategy"])
    even = at.dataframe[0].value
    assert (even["break_even"] == even["k"] / (even["k"] + 1)).all()
    assert len(_charts(at)) == 2  # acceptance vs k, accepted-length histograms


def test_energy_tables_figures_and_trace_are_labelled(app):
    at = _open(app, "energy")
    assert len(at.table) == 2
    assert "measured (nvml)" in at.caption[1].value
    assert len(_charts(at)) == 3  # ladder, power vs k, power trace
    assert {m.label for m in at.metric} >= {"energy (J)", "mean power (W)"}


def _html(at: AppTest) -> str:
    return "".join(h.proto.body for h in at.get("html"))


def test_texts_redundancy_and_cascading_drill_down(app):
    at = _open(app, "texts")
    assert at.selectbox(key="texts_strategy").value == "ngram"  # opens on a drafted strategy
    assert at.selectbox(key="texts_strategy").options == ["ngram", "olifant-wikitext", "plain"]
    assert at.selectbox(key="texts_k").options == ["3", "5"]
    deadline = time.monotonic() + TIMEOUT_S  # Table 5 and the tokenizer load in the background, off the critical path
    while ("gs-accepted" not in _html(at) or not at.table) and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
    assert list(at.table[0].value["text source"])[0] == "reference"
    assert "gs-accepted" in _html(at), "the drafted generation shows accepted tokens highlighted"
    generated = next(h.proto.body for h in at.get("html") if "gs-accepted" in h.proto.body)
    why = [c.value for c in at.caption if "token ids" in c.value]  # the page's reason when it shows ids
    assert "the study drug or placebo" in re.sub(r"<[^>]+>", "", generated), why  # decoded (pubmed, prompt 0), not ids
    at.selectbox(key="texts_strategy").set_value("plain").run()
    assert at.selectbox(key="texts_k").options == ["0"]  # the cascade offers only what exists
    assert not at.exception


def test_filters_narrow_every_table(app):
    at = _open(app, "throughput")
    _multiselect(at, "f_task").set_value(["pubmed"])
    _multiselect(at, "f_strategy").set_value(["plain", "ngram"])
    at.run()
    table1 = at.table[0].value
    assert not any(c.startswith("wikitext") for c in table1.columns)
    assert set(table1["strategy"]) == {"plain", "ngram"}
    _multiselect(at, "f_task").set_value([])
    _multiselect(at, "f_strategy").set_value([])
    at.run()


def test_live_run_refreshes_queue(monkeypatch, live_db):
    at = _app(monkeypatch, live_db)
    assert any("refreshing every" in c.value for c in at.caption)
    assert {m.label: m.value for m in at.metric}["running"] == "1"


def test_energy_page_without_any_power_source(monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path / 'nopower.db'}"
    populate(url, energy=False)
    at = _app(monkeypatch, url)
    at = _open(at, "energy")
    assert "no energy data" in at.caption[1].value
    assert any("no power source" in i.value for i in at.info)
    assert {m.label: m.value for m in at.metric}["energy (J)"] == "–"


@pytest.mark.parametrize("state", ["missing", "no_schema", "no_experiment"])
def test_empty_database_shows_how_to_start(monkeypatch, tmp_path, state):
    path = tmp_path / "empty.db"
    url = f"sqlite:///{path}"
    if state == "no_schema":
        path.write_bytes(b"")
    elif state == "no_experiment":
        open_db(url)
    at = _app(monkeypatch, url)
    assert "greenspec demo" in _text(at) and "greenspec run examples/demo.toml" in _text(at)
    assert not at.table and not _charts(at)
    assert path.exists() == (state != "missing")  # the dashboard never creates a database


def test_new_results_show_on_the_next_render(monkeypatch, tmp_path):
    """The cache is keyed on the data version: a generation stored during a run appears on the next render."""
    from sqlalchemy import insert, select

    from storage.models import Cell, Generation

    url = f"sqlite:///{tmp_path / 'growing.db'}"
    populate(url, live=True)
    at = _app(monkeypatch, url)

    def ngram_prompts(at: AppTest) -> int:
        results = at.dataframe[1].value
        row = results[
            (results["strategy"] == "ngram")
            & (results["task"] == "pubmed")
            & (results["k"] == 3)
            & (results["regime"] == "uncached")
        ]
        return int(row["prompts"].iloc[0])

    assert ngram_prompts(at) == 3
    engine, _ = open_db(url, migrate=False)
    with engine.begin() as conn:
        cols = [c for c in Generation.__table__.columns if c.name not in ("id", "cell_id", "prompt_index")]
        row = (
            conn.execute(
                select(*cols).where(
                    Generation.strategy == "ngram",
                    Generation.task == "pubmed",
                    Generation.k == 3,
                    Generation.regime == "uncached",
                )
            )
            .mappings()
            .first()
        )
        cell_id = conn.execute(
            insert(Cell).values(
                experiment_id=1,
                key="new",
                kind="sweep",
                state="done",
                strategy="ngram",
                task="pubmed",
                k=3,
                regime="uncached",
                prompt_index=3,
                params={},
            )
        ).inserted_primary_key[0]
        conn.execute(insert(Generation).values(**row, cell_id=cell_id, prompt_index=3))
    at.run()
    assert ngram_prompts(at) == 4
    assert {m.label: m.value for m in at.metric}["generations"] == "61"


def test_the_dashboard_never_writes(monkeypatch, tmp_path, fixture_db):
    """Every page over a finished database leaves its file byte for byte as it was, and no -wal/-shm beside it."""
    import sqlite3

    from storage.db import sqlite_path

    with sqlite3.connect(sqlite_path(fixture_db)) as src, sqlite3.connect(tmp_path / "g.db") as dst:
        src.backup(dst)  # a self-contained copy (the fixture's writer may still hold rows in its -wal)
    files = lambda: {p.name: p.read_bytes() for p in tmp_path.iterdir()}  # noqa: E731
    before = files()
    at = _app(monkeypatch, f"sqlite:///{tmp_path / 'g.db'}")
    for page in ("throughput", "acceptance", "energy", "texts", "paper"):
        _open(at, page)
    assert files() == before


def test_a_draft_on_bases_of_two_sizes_gets_its_learning_curve(monkeypatch, tmp_path, fixture_db):
    """The fixture's olifant generations copied under two strategies on corpora of 10^4 and 10^5 tokens, the small one
    accepting half as often: the Acceptance page draws the curve and tables the slope (+0.5 x acceptance a decade)."""
    import sqlite3

    from storage.models import Generation

    db = tmp_path / "curve.db"
    with sqlite3.connect(fixture_db.removeprefix("sqlite:///")) as src, sqlite3.connect(db) as dst:
        src.backup(dst)  # with its write-ahead log, which a file copy would miss
    columns = [c.name for c in Generation.__table__.columns if c.name not in ("id", "cell_id", "strategy", "accepted")]
    with sqlite3.connect(db) as conn:
        (spec,) = conn.execute("SELECT spec_toml FROM experiments").fetchone()
        spec += (
            '\n[[corpora]]\nname = "small"\npath = "small.txt"\nmax_tokens = 10_000\n'
            '\n[[corpora]]\nname = "big"\npath = "big.txt"\nmax_tokens = 100_000\n'
            '\n[[strategies]]\nname = "oli-small"\ndraft = "olifant"\ncorpus = "small"\n'
            '\n[[strategies]]\nname = "oli-big"\ndraft = "olifant"\ncorpus = "big"\n'
        )
        conn.execute("UPDATE experiments SET spec_toml = ?", (spec,))
        cols = ", ".join(columns)
        for i, (name, accepted) in enumerate((("oli-small", "accepted / 2"), ("oli-big", "accepted")), start=1):
            conn.execute(  # a cell id of its own (unique per generation; the copies have no cell row)
                f"INSERT INTO generations (cell_id, strategy, accepted, {cols}) SELECT cell_id + ?, ?, {accepted}, "
                f"{cols} FROM generations WHERE strategy = 'olifant-wikitext'",
                (i * 10**6, name),
            )
        assert conn.execute("SELECT count(*) FROM generations WHERE strategy = 'oli-big' AND k = 5").fetchone()[0]
    at = _open(_app(monkeypatch, f"sqlite:///{db}"), "acceptance")
    titles = [c.proto.spec for c in _charts(at)]
    assert any("Learning curve" in t for t in titles)
    slopes = at.dataframe[-1].value
    assert set(slopes["family"]) == {"olifant"} and (slopes["sizes"] == 2).all()
    assert (slopes["slope_per_decade"] > 0).all()
