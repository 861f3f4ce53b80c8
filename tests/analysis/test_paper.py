"""The paper's published numbers as data, and compare() of a run summary with them cell by cell."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.paper import COMPARE_COLUMNS, PAPER_SPEC, compare, load_results, strategy_names


@pytest.fixture(scope="module")
def paper():
    return load_results()


def _one(paper, **where) -> pd.Series:
    rows = paper
    for key, value in where.items():
        rows = rows[rows[key] == value]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_data_file_parses_with_sources(paper):
    assert len(paper) > 50
    assert paper["source"].str.match(r"^(Table [1-7]|Figure [12]|Latency)$").all()
    assert (paper["section"] != "").all() and (paper["quote"] != "").all()
    assert paper["value"].notna().all()
    ranges = paper[paper["value_max"].notna()]
    assert (ranges["value_max"] > ranges["value"]).all()
    assert set(paper["task"]) <= {"", "wikitext", "pubmed", "eurlex"}  # the paper's task names mapped
    assert "4-gram" not in set(paper["strategy"])


def test_pinned_values(paper):
    # Table 3: olifant-eurlex on legal text cuts energy per token by 2.51x (529 vs 1,326 J/100 tokens, k=8)
    assert _one(paper, strategy="olifant-eurlex", metric="energy_ratio", k="8", regime="uncached")["value"] == 2.51
    assert _one(paper, strategy="olifant-eurlex", metric="j_per_100_tokens", k="8", regime="uncached")["value"] == 529
    # Table 1: 2.43x at k=8; Table 6: 38.1% acceptance at k=3, stored as a fraction, printed as in the paper
    assert _one(paper, strategy="olifant-eurlex", metric="speedup", k="8", regime="uncached")["value"] == 2.43
    acc = _one(paper, strategy="olifant-eurlex", metric="acceptance", k="3", regime="uncached")
    assert acc["value"] == pytest.approx(0.381) and acc["paper_value"] == "38.1" and acc["unit"] == "%"
    # Table 4: 93 J per 100 tokens, cached k=3; Table 5: legal texts compress to 0.18
    assert _one(paper, strategy="olifant-eurlex", metric="j_per_100_tokens", regime="cached")["value"] == 93
    assert _one(paper, task="eurlex", metric="gzip_ratio")["value"] == 0.18
    # the paper's 4-gram is greenspec's ngram strategy: 24.7% at k=3 on legal text
    assert _one(paper, strategy="ngram", metric="acceptance", task="eurlex")["value"] == pytest.approx(0.247)
    # a range: olifant-pubmed on medical text, 1.48-1.53x over k
    r = _one(paper, strategy="olifant-pubmed", task="pubmed", metric="speedup")
    assert (r["value"], r["value_max"], r["k"]) == (1.48, 1.53, "")


SUMMARY = pd.DataFrame(
    [
        # strategy, task, k, regime, speedup, energy_ratio, acceptance
        ("olifant-eurlex", "eurlex", 8, "uncached", 2.0, 3.0, 0.25),
        ("olifant-eurlex", "eurlex", 3, "uncached", 1.5, 1.2, 0.40),
        ("olifant-pubmed", "pubmed", 5, "uncached", 1.50, 1.3, 0.1),
        ("olifant-pubmed", "pubmed", 8, "uncached", 1.60, 1.3, 0.1),
        ("plain", "eurlex", 0, "uncached", 1.0, 1.0, math.nan),
    ],
    columns=["strategy", "task", "k", "regime", "speedup", "energy_ratio", "acceptance"],
)


def test_compare_point_values(paper):
    table = compare(SUMMARY, paper)
    assert list(table.columns) == COMPARE_COLUMNS
    speed = table[
        (table.metric == "speedup")
        & (table.strategy == "olifant-eurlex")
        & (table.k == 8)
        & (table.source == "Table 1")
    ].iloc[0]
    assert (speed.paper, speed.ours) == (2.43, 2.0)
    assert speed["diff"] == pytest.approx(2.0 - 2.43) and speed.rel_diff == pytest.approx((2.0 - 2.43) / 2.43)
    energy = table[
        (table.metric == "energy_ratio")
        & (table.strategy == "olifant-eurlex")
        & (table.regime == "uncached")
        & (table.k == 8)
    ].iloc[0]
    assert energy["diff"] == pytest.approx(3.0 - 2.51) and energy.in_range is None
    acc = table[
        (table.metric == "acceptance")
        & (table.k == 3)
        & (table.strategy == "olifant-eurlex")
        & (table.source == "Table 6")
    ].iloc[0]
    assert acc["diff"] == pytest.approx(0.40 - 0.381)


def test_compare_ranges_measure_to_the_nearest_bound(paper):
    table = compare(SUMMARY, paper, keep_unmatched=False)
    pub = table[(table.metric == "speedup") & (table.strategy == "olifant-pubmed") & (table.task == "pubmed")]
    by_k = pub.set_index("k")
    assert by_k.loc[5, "in_range"] and by_k.loc[5, "diff"] == 0.0  # 1.50 within 1.48-1.53
    assert not by_k.loc[8, "in_range"] and by_k.loc[8, "diff"] == pytest.approx(1.60 - 1.53)
    assert table["ours"].notna().all()  # unmatched paper numbers left out on request
    # a blank key in the paper matches any run value: the plain ROUGE-L row is not in this summary's metrics
    assert "rouge_l" not in set(table["metric"])


def test_compare_keeps_unmatched_and_renames(paper):
    renamed = SUMMARY.assign(strategy=SUMMARY["strategy"].replace({"olifant-eurlex": "olifant-legal"}))
    table = compare(renamed, paper, names={"olifant-legal": "olifant-eurlex"})
    assert (table.strategy == "olifant-eurlex").any()
    missing = table[table.metric == "latency_ms"]
    assert len(missing) == 3 and missing["ours"].isna().all()  # no latency in this summary: paper values kept


def test_compare_without_key_columns_matches_tasks_only(paper):
    red = pd.DataFrame(
        {"task": ["eurlex", "wikitext"], "within_text": [0.1, 0.3], "cross_doc": [0.7, 0.2], "gzip_ratio": [0.2, 0.4]}
    )
    table = compare(red, paper, keep_unmatched=False)
    assert set(table["metric"]) == {"within_text", "cross_doc", "gzip_ratio"}
    gz = table[table.metric == "gzip_ratio"].iloc[0]
    assert (gz.task, gz.paper, gz.ours) == ("eurlex", 0.18, 0.2)


def test_compare_maps_task_names(paper):
    demo = pd.DataFrame(
        {
            "strategy": ["olifant-shakespeare"],
            "task": ["shakespeare"],
            "k": [8],
            "regime": ["uncached"],
            "speedup": [1.9],
        }
    )
    table = compare(
        demo,
        paper,
        names={"olifant-shakespeare": "olifant-eurlex"},
        tasks={"shakespeare": "eurlex"},
        keep_unmatched=False,
    )
    assert table[["strategy", "task", "k", "paper", "ours"]].values.tolist() == [
        ["olifant-eurlex", "eurlex", 8, 2.43, 1.9]
    ]


def test_baseline_names_come_from_the_spec_drafts():
    assert strategy_names(PAPER_SPEC.read_text()) == {"4-gram": "ngram", "TinyLlama": "neural"}
    renamed = (
        '[[strategies]]\nname = "words"\ndraft = "ngram-paper"\n[[strategies]]\nname = "small"\ndraft = "neural"\n'
    )
    paper = load_results(strategy_names(renamed))
    assert {"words", "small"} <= set(paper["strategy"]) and not {"ngram", "neural"} & set(paper["strategy"])
    assert "TinyLlama" in set(
        load_results(strategy_names('[[strategies]]\nname = "w"\ndraft = "ngram-paper"\n'))["strategy"]
    )
