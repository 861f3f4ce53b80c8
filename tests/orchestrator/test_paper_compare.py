"""`greenspec export --compare paper` over the fixture database: the run beside the paper's numbers."""

from __future__ import annotations

import io
import re

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.paper import COMPARE_COLUMNS, redundancy_frame
from orchestrator.cli import main
from storage.db import open_db
from storage.latency import store_latency
from tests.dashboard.populate import populate


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
    df = pd.read_csv(io.StringIO(res.stdout))
    assert list(df.columns) == COMPARE_COLUMNS
    ours = df[df["ours"].notna()]
    # the fixture has plain, ngram and olifant-wikitext on wikitext and pubmed: joined where the paper has them
    assert {"speedup", "rouge_l", "latency_ms", "within_text", "cross_doc"} <= set(ours["metric"])
    lat = ours[ours["metric"] == "latency_ms"].iloc[0]
    assert (lat["strategy"], lat["paper"], lat["ours"]) == ("ngram", 0.09, pytest.approx(0.045))
    assert lat["diff"] == pytest.approx(0.045 - 0.09)
    # paper numbers the run has no cell for are left out (e.g. olifant-eurlex), and counted on stderr
    assert df["ours"].notna().all() and "olifant-eurlex" not in set(df["strategy"])
    said = re.fullmatch(
        r"compare: (\d+) of the paper's (\d+) numbers matched \((\d+) rows\); (\d+) without .*", res.stderr.strip()
    )
    assert said, res.stderr
    matched, total, rows, without = map(int, said.groups()[:4])
    assert rows == len(df) and matched + without == total and 0 < matched < total


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


def _own_names_db(tmp_path) -> str:
    """The fixture database with its pubmed task renamed to a name the paper does not have."""
    from sqlalchemy import update

    from storage.models import Cell, Generation, Reference

    url = f"sqlite:///{tmp_path / 'own.db'}"
    populate(url)
    engine, Session = open_db(url)
    with Session() as s:
        for table in (Cell, Generation, Reference):
            s.execute(update(table).where(table.task == "pubmed").values(task="shakespeare"))
        s.commit()
    engine.dispose()
    return url


def test_own_task_names_are_left_out_and_counted_or_paired_by_a_map_file(tmp_path):
    url = _own_names_db(tmp_path)
    plain = CliRunner().invoke(main, ["--db", url, "export", "--compare", "paper"])
    assert plain.exit_code == 0, plain.output
    df = pd.read_csv(io.StringIO(plain.stdout), keep_default_na=False)
    assert "shakespeare" not in set(df["task"]) and "pubmed" not in set(df["task"])
    left = int(re.search(r"and (\d+) rows of this run without a paper counterpart", plain.stderr).group(1))
    assert left > 0
    names = tmp_path / "names.toml"
    names.write_text('[tasks]\nshakespeare = "pubmed"\n')
    mapped = CliRunner().invoke(main, ["--db", url, "export", "--compare", "paper", "--map", str(names)])
    assert mapped.exit_code == 0, mapped.output
    paired = pd.read_csv(io.StringIO(mapped.stdout), keep_default_na=False)
    assert "pubmed" in set(paired["task"]) and len(paired) > len(df)
    assert int(re.search(r"and (\d+) rows of this run without", mapped.stderr).group(1)) < left
    names.write_text('[tasks]\nshakespeare = "poetry"\n')
    bad = CliRunner().invoke(main, ["--db", url, "export", "--compare", "paper", "--map", str(names)])
    assert bad.exit_code == 2 and "'shakespeare' = 'poetry': the paper has no such name" in bad.stderr


def test_compared_k_is_one_type(db):
    from orchestrator.cli.paper_compare import comparison_frame

    _, Session = open_db(db)
    with Session() as s:
        table = comparison_frame(s, None)
    assert {type(v) for v in table["k"]} == {str} and {"", "3"} <= set(table["k"])
