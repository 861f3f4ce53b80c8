"""The Paper page over the fixture database: the paper's numbers beside the run's, and the name pairing."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from analysis.paper import load_results
from storage.db import open_db
from storage.latency import store_latency
from tests.dashboard.populate import populate

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The app on the Paper page, over the fixture experiment with one stored latency row."""
    url = f"sqlite:///{tmp_path_factory.mktemp('paper') / 'p.db'}"
    populate(url)
    _, Session = open_db(url)
    with Session() as s:
        store_latency(
            s,
            "fixture",
            [
                {
                    "strategy": "ngram",
                    "draft": "ngram",
                    "engine": "ngram",
                    "queries": 50,
                    "mean_us": 45.0,
                    "median_us": 40.0,
                    "p95_us": 60.0,
                    "min_us": 30.0,
                }
            ],
            prompts=10,
            repeats=5,
        )
        s.commit()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GREENSPEC_DB", url)
        at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
        at.run()
        at.switch_page("views/paper.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        yield at


def test_paper_page_puts_numbers_side_by_side(page):
    assert page.title[0].value == "Paper"
    assert "not the values" in page.caption[1].value
    frames = {h.value: d.value for h, d in zip(page.subheader, page.dataframe)}
    speed = frames["Throughput and speedup (Tables 1 and 2, Figure 1)"]
    matched = speed[speed["ours"].notna()]
    assert {"olifant-wikitext", "plain"} <= set(matched["strategy"]) and (matched["task"] == "wikitext").any()
    assert speed["ours"].isna().any()  # the paper's cells this run lacks (e.g. olifant-eurlex) are listed too
    for frame in frames.values():  # matched rows first; k of one type (text), no Arrow fallback
        found = frame["ours"].notna().tolist()
        assert found == sorted(found, reverse=True)
        assert {type(v) for v in frame["k"]} <= {str}
    assert page.metric[0].value.endswith(f" of {len(load_results())}")
    lat = frames["Draft latency (§2.3, `greenspec latency SPEC`)"]
    assert lat.loc[lat["strategy"] == "ngram", "ours"].item() == pytest.approx(0.045)
    red = frames["Redundancy of the texts (Table 5, on the verifier's tokens)"]
    assert red[red["ours"].notna()]["task"].isin(["wikitext", "pubmed"]).all()


def test_only_ours_toggle_hides_unmatched_rows(page):
    page.toggle(key="paper_only_ours").set_value(True).run()
    assert not page.exception
    for frame in (d.value for d in page.dataframe):
        assert frame["ours"].notna().all()


def test_run_names_the_paper_lacks_are_paired_by_the_user(tmp_path):
    """A demo-like run (tasks named otherwise) matches nothing until its task is paired with the paper's."""
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'renamed.db'}"
    populate(url)
    engine, _ = open_db(url)
    with engine.begin() as conn:
        for table in ("generations", "cells", "references"):
            conn.execute(text(f"update \"{table}\" set task = 'shakespeare' where task = 'wikitext'"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GREENSPEC_DB", url)
        at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
        at.run()
        at.switch_page("views/paper.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]

        def matched_speed_tasks():
            frames = {h.value: d.value for h, d in zip(at.subheader, at.dataframe)}
            speed = frames["Throughput and speedup (Tables 1 and 2, Figure 1)"]
            return set(speed.loc[speed["ours"].notna(), "task"])

        assert not {"wikitext", "shakespeare"} & matched_speed_tasks()  # unpaired: compared with nothing
        at.selectbox(key="paper_task_shakespeare").set_value("wikitext").run()
        assert not at.exception
        assert "wikitext" in matched_speed_tasks()
