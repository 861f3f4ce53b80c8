"""`greenspec export --compare paper` over the fixture database: the run beside the paper's numbers."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from storage.db import open_db
from storage.latency import store_latency
from tests.dashboard.populate import populate
from workers.paper import COMPARE_COLUMNS, redundancy_frame


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('cmp') / 'g.db'}"
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
    return url


def test_csv_puts_run_and_paper_side_by_side(db):
    res = CliRunner().invoke(main, ["--db", db, "export", "--compare", "paper", "--format", "csv"])
    assert res.exit_code == 0, res.output
    df = pd.read_csv(io.StringIO(res.output))
    assert list(df.columns) == COMPARE_COLUMNS
    ours = df[df["ours"].notna()]
    # the fixture has plain, ngram and olifant-wikitext on wikitext and pubmed: joined where the paper has them
    assert {"speedup", "rouge_l", "latency_ms", "within_text", "cross_doc"} <= set(ours["metric"])
    lat = ours[ours["metric"] == "latency_ms"].iloc[0]
    assert (lat["strategy"], lat["paper"], lat["ours"]) == ("ngram", 0.09, pytest.approx(0.045))
    assert lat["diff"] == pytest.approx(0.045 - 0.09)
    # paper numbers the run has no cell for stay, with no value of ours (e.g. olifant-eurlex)
    assert df[df["strategy"] == "olifant-eurlex"]["ours"].isna().all()


def test_markdown_and_bad_format(db):
    res = CliRunner().invoke(main, ["--db", db, "export", "--compare", "paper", "--format", "markdown"])
    assert res.exit_code == 0 and "| source" in res.output and "Table 5" in res.output
    bad = CliRunner().invoke(main, ["--db", db, "export", "--compare", "nature"])
    assert bad.exit_code != 0 and "nature" in bad.output


def test_redundancy_frame_uses_the_papers_definitions():
    refs = pd.DataFrame(
        {
            "task": ["a", "a", "b"],
            "tokens": [[1, 2, 3, 4, 1, 2, 3, 4, 1], [2, 3, 4, 1, 9], [5, 6]],
            "text": ["x", "y", "z"],
        }
    )
    red = redundancy_frame(refs).set_index("task")
    # task a: within (2/6 + 0/2) / 2 = 1/6; cross (1/4 + 1/2) / 2 = 3/8 (see tests/workers/test_metrics.py)
    assert red.loc["a", "within_text"] == pytest.approx(1 / 6) and red.loc["a", "cross_doc"] == pytest.approx(3 / 8)
    assert red.loc["b", "texts"] == 1 and pd.isna(red.loc["b", "within_text"])
