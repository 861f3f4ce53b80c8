"""Pure table helpers: filters, the paper's pivots, bold best, exports, step segmentation, Table 5."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from analysis import tables
from analysis.summary import summary_frame
from storage.db import open_db
from tests.dashboard.populate import EXPERIMENT, PROMPTS


@pytest.fixture(scope="module")
def summary(fixture_db) -> pd.DataFrame:
    """The fixture experiment's summary frame, read once."""
    _, Session = open_db(fixture_db, migrate=False)
    with Session() as s:
        return summary_frame(s, EXPERIMENT)


def test_filter_keeps_plain_for_any_k(summary):
    out = tables.filter_frame(summary, ks=[5], tasks=["pubmed"])
    assert set(out["k"]) == {0, 5}
    assert set(out["task"]) == {"pubmed"}
    assert "plain" in set(out["strategy"])


def test_filter_with_no_selection_keeps_everything(summary):
    assert len(tables.filter_frame(summary)) == len(summary)


def test_table1_pivots_strategy_k_by_task_and_metric(summary):
    spec = tables.PAPER_TABLES["table1"]
    table = tables.paper_table(summary, spec.metrics, spec.regime)
    assert list(table.index) == [
        ("plain", 0),
        ("ngram", 3),
        ("ngram", 5),
        ("olifant-wikitext", 3),
        ("olifant-wikitext", 5),
    ]
    assert list(table.columns) == [
        ("pubmed", "tok/s"),
        ("pubmed", "speedup"),
        ("wikitext", "tok/s"),
        ("wikitext", "speedup"),
    ]
    assert table.loc[("plain", 0), ("wikitext", "speedup")] == pytest.approx(1.0)
    row = summary[
        (summary["strategy"] == "ngram")
        & (summary["k"] == 3)
        & (summary["task"] == "pubmed")
        & (summary["regime"] == "uncached")
    ].iloc[0]
    assert table.loc[("ngram", 3), ("pubmed", "tok/s")] == pytest.approx(row["tokens_per_s"])


def test_acceptance_is_a_percentage(summary):
    spec = tables.PAPER_TABLES["table6"]
    table = tables.paper_table(summary[summary["draft"] != "plain"], spec.metrics, spec.regime)
    values = table.xs("accept %", axis=1, level=1).stack()
    assert values.between(1, 100).all()


def test_best_cells_max_for_speed_min_for_energy(summary):
    t1 = tables.PAPER_TABLES["table1"]
    best = tables.best_cells(tables.paper_table(summary, t1.metrics, t1.regime), t1.metrics)
    assert best.sum().tolist() == [1, 1, 1, 1]
    t3 = tables.PAPER_TABLES["table3"]
    table3 = tables.paper_table(summary, t3.metrics, t3.regime)
    best3 = tables.best_cells(table3, t3.metrics)
    col = ("wikitext", "J/100 tok")
    assert table3[col][best3[col]].iloc[0] == table3[col].min()


def test_latex_bolds_the_best_and_escapes():
    metrics = tables.PAPER_TABLES["table1"].metrics
    table = pd.DataFrame(
        {("wiki_text", "tok/s"): [10.0, 30.0], ("wiki_text", "speedup"): [1.0, 3.0]},
        index=pd.MultiIndex.from_tuples([("plain", 0), ("olifant_x", 3)], names=["strategy", "k"]),
    )
    latex = tables.to_latex(table, metrics, caption="Table 1", label="tab:t1")
    assert r"\textbf{30.0}" in latex and r"\textbf{3.00x}" in latex
    assert r"\textbf{10.0}" not in latex
    assert r"wiki\_text" in latex and r"olifant\_x" in latex
    assert r"\caption{Table 1}" in latex and r"\toprule" in latex


def test_csv_round_trips_values(summary):
    spec = tables.PAPER_TABLES["table2"]
    table = tables.paper_table(summary, spec.metrics, spec.regime)
    back = pd.read_csv(pd.io.common.StringIO(tables.to_csv(table)), header=[0, 1], index_col=[0, 1])
    assert back.to_numpy() == pytest.approx(table.to_numpy())


def test_styled_page_table_flattens_headers_and_marks_best(summary):
    spec = tables.PAPER_TABLES["table1"]
    table = tables.paper_table(summary, spec.metrics, spec.regime)
    html = tables.styled(table, spec.metrics).to_html()
    assert "wikitext · speedup" in html and "font-weight: bold" in html
    bold_rule = re.search(r"\n([^{}]*)\{\s*font-weight: bold", html).group(1)
    assert bold_rule.count("_row") == 4  # one best per (task, metric) column
    assert tables.to_latex(table, spec.metrics).count(r"\textbf") == 4


def test_break_even_is_k_over_k_plus_one(summary):
    even = tables.break_even_frame(summary)
    assert set(even["strategy"]) == {"ngram", "olifant-wikitext"}
    assert (even["break_even"] == even["k"] / (even["k"] + 1)).all()


def test_segment_steps_splits_accepted_then_verifier_token():
    steps = tables.segment_steps([1, 2, 3, 4, 5, 6, 7], [2, 0, 3])
    assert steps == [([1, 2], [3]), ([], [4]), ([5, 6, 7], [])]
    assert tables.segment_steps([9, 8], []) == [([], [9]), ([], [8])]  # plain or missing step record


def test_decode_segments_rebuild_the_text():
    from workers.models.tokenizer import load_tokenizer

    tok = load_tokenizer("mistral")
    text = PROMPTS["wikitext"][0][1].strip()
    ids = tok(text, add_special_tokens=False).input_ids
    steps = tables.segment_steps(ids, [2, 0, 1, 3] * 40)
    segments = tables.decode_segments(steps, lambda x: tok.decode(x, skip_special_tokens=True))
    assert "".join(s for s, _ in segments) == tok.decode(ids, skip_special_tokens=True)
    assert any(accepted for _, accepted in segments) and not all(accepted for _, accepted in segments)
    html = tables.highlight_html(segments + [("<b>", False)])
    assert html.count('class="gs-accepted"') == sum(a for _, a in segments) and "&lt;b&gt;" in html


def test_redundancy_counts_each_prompt_once():
    texts = pd.DataFrame(
        {
            "strategy": ["a"] * 4,
            "task": ["t"] * 4,
            "prompt_index": [0, 0, 1, 1],
            "text": ["one two three four five"] * 2 + ["one two three four six"] * 2,
        }
    )
    refs = pd.DataFrame({"task": ["t"], "prompt_index": [0], "text": ["x y z w x y z w"]})
    frame = tables.redundancy_by_source(texts, refs)
    a = frame[frame["strategy"] == "a"].iloc[0]
    assert a["texts"] == 2  # duplicates across k/regime dropped
    assert a["overlap"] == pytest.approx(0.5)  # ("one two three four") shared, the other 4-gram not
    ref = frame[frame["strategy"] == "reference"].iloc[0]
    assert ref["repetition"] == pytest.approx(1 / 5) and math.isnan(ref["overlap"])
    table = tables.redundancy_table(frame, tables.PAPER_TABLES["table5"].metrics)
    assert list(table.index) == ["reference", "a"]


def test_segment_steps_uses_tokens_per_step_for_cached_rounds():
    # cached: round 1 accepted 2 drafts with no verifier token, round 2 was a fast-path reject (1 verifier token)
    steps = tables.segment_steps([1, 2, 3, 4, 5], [2, 0, 1], [2, 1, 2])
    assert steps == [([1, 2], []), ([], [3]), ([4], [5])]


def test_energy_ratio_bolds_the_maximum():
    t3 = tables.PAPER_TABLES["table3"]
    table = pd.DataFrame(
        {("t", "J/100 tok"): [2000.0, 500.0, 800.0], ("t", "ratio vs plain"): [1.0, 4.0, 2.5]},
        index=pd.MultiIndex.from_tuples([("plain", 0), ("ngram", 2), ("ngram", 3)]),
    )
    best = tables.best_cells(table, t3.metrics)
    assert best[("t", "ratio vs plain")].tolist() == [False, True, False]  # plain ÷ strategy: higher is better
    assert best[("t", "J/100 tok")].tolist() == [False, True, False]


def test_acceptance_tables_show_first_token_acceptance(summary):
    spec = tables.PAPER_TABLES["table7"]
    table = tables.paper_table(summary[summary["draft"] != "plain"], spec.metrics, spec.regime)
    assert ("wikitext", "1st-token %") in table.columns
    assert "first_token_acceptance" in tables.break_even_frame(summary).columns


def test_a_table_cell_is_one_measure_and_the_current_version():
    """A coordinate with a timed and a replayed row shows the replayed figure, never their mean; an older version's
    row is left out."""
    rows = [
        ("ngram", 3, "timed", "current", 10.0),
        ("ngram", 3, "replay", "current", 14.0),
        ("ngram", 5, "timed", "current", 12.0),  # timed only: shown
        ("ngram", 8, "replay", "older", 99.0),  # an earlier spec version: left out
    ]
    df = pd.DataFrame(rows, columns=["strategy", "k", "measure", "version", "tokens_per_s"]).assign(
        task="t", regime="uncached", temperature=0.0, draft="ngram"
    )
    table = tables.paper_table(df, (tables.TOKENS_PER_S,), "uncached")
    assert table[("t", "tok/s")].to_dict() == {("ngram", 3): 14.0, ("ngram", 5): 12.0}


def test_shown_frames_have_one_type_per_column_so_arrow_takes_them():
    """Before, a k column mixing 8, "" and "12|16|24" failed Arrow ("Could not convert '' with type
    str: tried to convert to int64") and Streamlit fell back to its own fixes."""
    import pyarrow as pa

    mixed = pd.DataFrame(
        {
            "k": pd.Series([8, "", "12|16|24", None], dtype=object),
            "ours": [1.0, math.nan, 2.0, 3.0],
            "in_range": [True, None, False, None],
            "note": pd.Series([1, "text", None, 2.5], dtype=object),
        }
    )
    with pytest.raises(pa.ArrowException):
        pa.Table.from_pandas(mixed)
    shown = tables.one_type_per_column(mixed)
    pa.Table.from_pandas(shown)
    assert list(shown["k"]) == ["8", "", "12|16|24", ""]
    assert list(shown["note"])[:2] == ["1", "text"] and pd.isna(shown["note"].iloc[2])
    assert shown["in_range"].tolist() == [True, None, False, None] and shown["ours"].dtype == float
    assert list(mixed["k"]) == [8, "", "12|16|24", None]  # the frame itself is left as it is


def test_an_integer_k_stays_integer_and_a_missing_one_does_not_make_it_float():
    assert tables.k_column(pd.Series([0, 3, 5])).tolist() == [0, 3, 5]
    failures = tables.k_column(pd.Series([3.0, math.nan, 8.0]))  # a failed train cell has no k
    assert str(failures.dtype) == "Int64" and failures.tolist() == [3, pd.NA, 8]
    assert tables.k_column(pd.Series(["8", "", "12|16|24"], dtype=object)).tolist() == ["8", "", "12|16|24"]
    assert tables.k_column(pd.Series(["8", "5"], dtype=object)).tolist() == ["8", "5"]  # text stays text


def test_the_summary_and_its_page_tables_keep_k_one_type(summary):
    import pyarrow as pa

    shown = tables.one_type_per_column(summary)
    assert shown["k"].tolist() == summary["k"].tolist() and shown["k"].dtype.kind == "i"
    spec = tables.PAPER_TABLES["table1"]
    page = tables.styled(tables.paper_table(summary, spec.metrics, spec.regime), spec.metrics).data
    assert {type(k) for k in page["k"]} == {int}
    pa.Table.from_pandas(page)


def test_paper_rows_know_plain_greedy_by_its_draft_whatever_its_name():
    from analysis.tables import paper_rows

    frame = pd.DataFrame({"strategy": ["baseline", "ngram"], "draft": ["plain", "ngram"]})
    assert list(paper_rows(frame, "table6")["strategy"]) == ["ngram"]  # acceptance: no plain row
    assert list(paper_rows(frame, "table1")["strategy"]) == ["baseline", "ngram"]  # speedup: plain is the reference
