"""analysis.columns: every result column declared once, every list of columns derived from it in the table's order."""

from __future__ import annotations

import pyarrow as pa

from analysis import columns
from analysis.columns import COMPARISON, SUMMARY, k_text, names

# `greenspec export --format csv`'s public contract (docs/cli.md), in this order
CSV_CONTRACT = [
    "strategy",
    "task",
    "k",
    "regime",
    "tokens_per_s",
    "speedup",
    "acceptance",
    "first_token_acceptance",
    "mal",
    "rouge_l",
    "exact_match",
    "j_per_100_tokens",
    "energy_ratio",
]


def test_the_export_keeps_the_public_csv_columns_in_their_order():
    shown = [c for c in columns.EXPORT_COLUMNS if c in CSV_CONTRACT]
    assert shown == CSV_CONTRACT
    assert columns.EXPORT_COLUMNS == [
        "strategy", "task", "k", "regime", "measure", "prompts", "n_prompts", "tokens_per_s", "speedup", "acceptance",
        "first_token_acceptance", "mal", "rouge_l", "exact_match", "j_per_100_tokens", "energy_ratio",
        "mean_power_w", "power_source",
    ]  # fmt: skip


def test_every_view_is_the_tables_order_and_every_column_is_declared_once():
    for table in (SUMMARY, COMPARISON):
        assert len(names(table)) == len(set(names(table)))
    assert set(columns.EXPORT_COLUMNS) | set(columns.OVERVIEW_COLUMNS) <= set(columns.SUMMARY_COLUMNS)
    order = {c: i for i, c in enumerate(columns.SUMMARY_COLUMNS)}
    for view in (columns.EXPORT_COLUMNS, columns.OVERVIEW_COLUMNS):
        assert [order[c] for c in view if not c.endswith(("_lo", "_hi"))] == sorted(
            order[c] for c in view if not c.endswith(("_lo", "_hi"))
        )
    assert columns.SUMMARY_COLUMNS[-1] == "note" and columns.SUMMARY_COLUMNS[0] == "experiment"
    compare = columns.COMPARE_COLUMNS
    for view in (columns.COMPARE_TEXT_COLUMNS, columns.COMPARE_PAGE_COLUMNS):
        assert view == [c for c in compare if c in view]


def test_intervals_follow_the_summarys_figure_order():
    """`analysis.intervals._figures` computes the figures in this order: the registry must list them so."""
    assert columns.INTERVAL_METRICS == (
        "tokens_per_s", "speedup", "acceptance", "first_token_acceptance", "mal", "j_per_100_tokens", "energy_ratio",
    )  # fmt: skip
    assert columns.INTERVAL_COLUMNS[:4] == ["tokens_per_s_lo", "tokens_per_s_hi", "speedup_lo", "speedup_hi"]
    tail = columns.SUMMARY_COLUMNS[-len(columns.INTERVAL_COLUMNS) - 1 : -1]
    assert tail == columns.INTERVAL_COLUMNS


def test_the_overview_shows_the_bounds_beside_their_figure():
    shown = columns.OVERVIEW_COLUMNS
    for metric in ("speedup", "acceptance", "energy_ratio"):
        at = shown.index(metric)
        assert shown[at + 1 : at + 3] == [f"{metric}_lo", f"{metric}_hi"]
    assert "tokens_per_s_lo" not in shown and shown[-1] == "note"


def test_k_text_gives_one_type_that_arrow_takes():
    values = [8, 8.0, None, float("nan"), "", "12|16|24", 0]
    assert [k_text(v) for v in values] == ["8", "8", "", "", "", "12|16|24", "0"]
    pa.array([k_text(v) for v in values])  # one type: no conversion error
