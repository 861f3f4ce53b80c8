"""`analysis.tables` to the character: whole LaTeX and HTML strings, exact frames, on small hand-made inputs.

Every expected value is a literal worked out by hand (the arithmetic sits beside it); nothing here needs Ray,
a database or a tokenizer.
"""

from __future__ import annotations

import math

import pandas as pd
import pandas.testing as pdt
import pytest

from analysis import tables
from analysis.tables import (
    ACCEPTANCE,
    GZIP,
    J_PER_100,
    MAL,
    OVERLAP,
    REPETITION,
    SPEEDUP,
    TOKENS_PER_S,
    best_cells,
    break_even_frame,
    decode_segments,
    filter_frame,
    highlight_html,
    ids_segments,
    paper_table,
    redundancy_by_source,
    redundancy_table,
    segment_steps,
    styled,
    to_latex,
)

NAN = math.nan
SPEED = (TOKENS_PER_S, SPEEDUP)

# One row per (task, strategy, k, regime) cell, as summary_frame gives. ngram k=3 uncached/wiki appears once, so
# a mean over regimes (regime None) differs from either regime alone. bolt has no pubmed row (a missing combination)
# and sorts before "plain" by name; zeta runs only cached.
SUMMARY = pd.DataFrame(
    [
        ("wiki", "plain", "plain", 0, "uncached", 10.0, 1.0, NAN),
        ("pubmed", "plain", "plain", 0, "uncached", 20.0, 1.0, NAN),
        ("wiki", "ngram", "ngram", 3, "uncached", 30.0, 3.0, 0.5),
        ("pubmed", "ngram", "ngram", 3, "uncached", 50.0, 2.5, 0.25),
        ("wiki", "ngram", "ngram", 2, "uncached", 25.0, 2.5, 0.75),
        ("wiki", "bolt", "bolt", 4, "uncached", 12.0, 1.2, 0.125),
        ("wiki", "plain", "plain", 0, "cached", 14.0, 1.0, NAN),
        ("wiki", "ngram", "ngram", 3, "cached", 70.0, 5.0, 0.5),
        ("pubmed", "zeta", "zeta", 1, "cached", 40.0, 2.0, 1.0),
    ],
    columns=["task", "strategy", "draft", "k", "regime", "tokens_per_s", "speedup", "acceptance"],
)


def frame(
    rows: list[tuple],
    index: list[tuple],
    columns: list[tuple],
    *,
    index_names=("strategy", "k"),
    column_names=("task", None),
) -> pd.DataFrame:
    """A float frame with (strategy, k) rows and (task, label) columns, as paper_table returns."""
    return pd.DataFrame(
        rows,
        index=pd.MultiIndex.from_tuples(index, names=list(index_names)),
        columns=pd.MultiIndex.from_tuples(columns, names=list(column_names)),
        dtype=float,
    )


def two_row_table() -> pd.DataFrame:
    """plain 10 tok/s at 1.00x, ngram k=3 30 tok/s with its speedup missing."""
    return frame([(10.0, 1.0), (30.0, NAN)], [("plain", 0), ("ngram", 3)], [("wiki", "tok/s"), ("wiki", "speedup")])


# The tabular of two_row_table() in to_latex, with the table's end; what precedes it varies by test.
TWO_ROW_TABULAR = (
    "\\begin{tabular}{llrr}\n"
    "\\toprule\n"
    " & task & \\multicolumn{2}{c}{wiki} \\\\\n"
    " &  & tok/s & speedup \\\\\n"
    "strategy & k &  &  \\\\\n"
    "\\midrule\n"
    "plain & 0 & 10.0 & \\textbf{1.00x} \\\\\n"
    "ngram & 3 & \\textbf{30.0} & \u2013 \\\\\n"
    "\\bottomrule\n"
    "\\end{tabular}\n"
    "\\end{table}\n"
)


# ---------------------------------------------------------------------------------------------------------------
# constants and specs


def test_constants_and_metric_defaults():
    assert (tables.PLAIN, tables.REGIMES, tables.NA) == ("plain", ("uncached", "cached"), "\u2013")
    assert (tables.BOLD_CSS, tables.BOLD_LATEX) == ("font-weight: bold", "textbf: --rwrap;")
    m = tables.Metric("c", "l")
    assert (m.fmt, m.best, m.scale) == ("{:.2f}", "max", 1.0)
    assert tables.TableSpec("t", (m,), None).plain is True
    assert [tables.PAPER_TABLES[f"table{i}"].regime for i in range(1, 8)] == [
        "uncached",
        "cached",
        "uncached",
        "cached",
        None,
        "uncached",
        "cached",
    ]
    assert [tables.PAPER_TABLES[f"table{i}"].plain for i in range(1, 8)] == [True] * 5 + [False] * 2
    assert (ACCEPTANCE.scale, ACCEPTANCE.label, J_PER_100.best, REPETITION.best, MAL.fmt) == (
        100.0,
        "accept %",
        "min",
        None,
        "{:.2f}",
    )


# ---------------------------------------------------------------------------------------------------------------
# paper_table


def test_paper_table_uncached_exact():
    table = paper_table(SUMMARY, SPEED, "uncached")
    # tasks sorted (pubmed < wiki), labels in metric order; rows plain first, then by name (bolt < ngram), then k;
    # bolt and ngram k=2 have no pubmed row: NaN, kept (the row is not all-NaN)
    expected = frame(
        [(20.0, 1.0, 10.0, 1.0), (NAN, NAN, 12.0, 1.2), (NAN, NAN, 25.0, 2.5), (50.0, 2.5, 30.0, 3.0)],
        [("plain", 0), ("bolt", 4), ("ngram", 2), ("ngram", 3)],
        [("pubmed", "tok/s"), ("pubmed", "speedup"), ("wiki", "tok/s"), ("wiki", "speedup")],
    )
    pdt.assert_frame_equal(table, expected)
    assert table.index.names == ["strategy", "k"] and table.columns.names == ["task", None]


def test_paper_table_cached_exact():
    table = paper_table(SUMMARY, (SPEEDUP, TOKENS_PER_S), "cached")
    # cached rows only: plain (wiki 14), ngram 3 (wiki 70, 5x), zeta 1 (pubmed 40, 2x); speedup first as asked
    expected = frame(
        [(NAN, NAN, 1.0, 14.0), (NAN, NAN, 5.0, 70.0), (2.0, 40.0, NAN, NAN)],
        [("plain", 0), ("ngram", 3), ("zeta", 1)],
        [("pubmed", "speedup"), ("pubmed", "tok/s"), ("wiki", "speedup"), ("wiki", "tok/s")],
    )
    pdt.assert_frame_equal(table, expected)


def test_paper_table_regime_none_averages_over_regimes():
    table = paper_table(SUMMARY, SPEED, None)
    # plain wiki: (10 + 14) / 2 = 12; ngram 3 wiki: (30 + 70) / 2 = 50 tok/s, (3 + 5) / 2 = 4.0x
    expected = frame(
        [
            (20.0, 1.0, 12.0, 1.0),
            (NAN, NAN, 12.0, 1.2),
            (NAN, NAN, 25.0, 2.5),
            (50.0, 2.5, 50.0, 4.0),
            (40.0, 2.0, NAN, NAN),
        ],
        [("plain", 0), ("bolt", 4), ("ngram", 2), ("ngram", 3), ("zeta", 1)],
        [("pubmed", "tok/s"), ("pubmed", "speedup"), ("wiki", "tok/s"), ("wiki", "speedup")],
    )
    pdt.assert_frame_equal(table, expected)


def test_paper_table_regime_none_needs_no_regime_column():
    bare = SUMMARY[SUMMARY["regime"] == "cached"].drop(columns=["regime"])
    table = paper_table(bare, (TOKENS_PER_S,), None)
    expected = frame(
        [(NAN, 14.0), (NAN, 70.0), (40.0, NAN)],
        [("plain", 0), ("ngram", 3), ("zeta", 1)],
        [("pubmed", "tok/s"), ("wiki", "tok/s")],
    )
    pdt.assert_frame_equal(table, expected)


def test_paper_table_scales_and_drops_all_missing_rows():
    table = paper_table(SUMMARY, (ACCEPTANCE,), "uncached")
    # x 100; plain's acceptance is NaN everywhere: its row goes. bolt keeps its one value (how="all", not "any")
    expected = frame(
        [(NAN, 12.5), (NAN, 75.0), (25.0, 50.0)],
        [("bolt", 4), ("ngram", 2), ("ngram", 3)],
        [("pubmed", "accept %"), ("wiki", "accept %")],
    )
    pdt.assert_frame_equal(table, expected)


def test_paper_table_averages_duplicate_cells():
    twice = pd.concat([SUMMARY, SUMMARY.assign(tokens_per_s=SUMMARY["tokens_per_s"] + 4.0)], ignore_index=True)
    table = paper_table(twice, (TOKENS_PER_S,), "cached")
    # mean of v and v + 4 is v + 2: plain 16, ngram 72, zeta 42
    expected = frame(
        [(NAN, 16.0), (NAN, 72.0), (42.0, NAN)],
        [("plain", 0), ("ngram", 3), ("zeta", 1)],
        [("pubmed", "tok/s"), ("wiki", "tok/s")],
    )
    pdt.assert_frame_equal(table, expected)


def test_paper_table_keeps_a_row_whose_k_is_missing():
    # jobs.k is nullable: a plain row stored without k still shows, under k = NaN (pivot_table keeps NaN keys
    # only with dropna=False)
    summary = pd.DataFrame(
        [("wiki", "plain", "plain", NAN, "uncached", 10.0), ("wiki", "ngram", "ngram", 3.0, "uncached", 30.0)],
        columns=["task", "strategy", "draft", "k", "regime", "tokens_per_s"],
    )
    table = paper_table(summary, (TOKENS_PER_S,), "uncached")
    expected = frame([(10.0,), (30.0,)], [("plain", NAN), ("ngram", 3.0)], [("wiki", "tok/s")])
    pdt.assert_frame_equal(table, expected)


def test_paper_table_unknown_regime_is_an_empty_frame():
    pdt.assert_frame_equal(paper_table(SUMMARY, SPEED, "warm"), pd.DataFrame())
    pdt.assert_frame_equal(paper_table(SUMMARY.iloc[0:0], SPEED, None), pd.DataFrame())


# ---------------------------------------------------------------------------------------------------------------
# best_cells


def test_best_cells_exact_mask():
    index = pd.MultiIndex.from_tuples([("plain", 0), ("ngram", 2), ("ngram", 3)], names=["strategy", "k"])
    columns = pd.MultiIndex.from_tuples(
        [("t", "repetition"), ("t", "other"), ("t", "tok/s"), ("t", "J/100 tok"), ("t", "speedup"), ("t", "MAL")],
        names=["task", None],
    )
    table = pd.DataFrame(
        [[0.1, 1.0, 10.0, 5.0, NAN, "n/a"], [0.2, 2.0, 30.0, 2.0, NAN, 2.0], [0.3, 3.0, 30.0, 9.0, NAN, 1.0]],
        index=index,
        columns=columns,
    )
    best = best_cells(table, (REPETITION, TOKENS_PER_S, J_PER_100, SPEEDUP, MAL))
    # repetition: no best (first column, yet later columns are still marked); other: no metric; tok/s: max 30,
    # a tie, both marked; J/100: min 2; speedup: all NaN, none; MAL: "n/a" coerced to NaN, max 2.0
    expected = pd.DataFrame(
        [
            [False, False, False, False, False, False],
            [False, False, True, True, False, True],
            [False, False, True, False, False, False],
        ],
        index=index,
        columns=columns,
    )
    pdt.assert_frame_equal(best, expected)


def test_best_cells_flat_columns_use_the_whole_name():
    table = pd.DataFrame({"tok/s": [1.0, 3.0], "J/100 tok": [4.0, 2.0], "s": [5.0, 6.0]})
    best = best_cells(table, (TOKENS_PER_S, J_PER_100))
    expected = pd.DataFrame({"tok/s": [False, True], "J/100 tok": [False, True], "s": [False, False]})
    pdt.assert_frame_equal(best, expected)


def test_best_cells_label_is_the_last_column_level():
    columns = pd.MultiIndex.from_tuples([("run", "J/100 tok", "tok/s"), ("run", "tok/s", "J/100 tok")])
    table = pd.DataFrame([[1.0, 1.0], [2.0, 2.0]], columns=columns)
    best = best_cells(table, (TOKENS_PER_S, J_PER_100))
    # the first column is tok/s (max: row 1), the second J/100 tok (min: row 0)
    expected = pd.DataFrame([[False, True], [True, False]], columns=columns)
    pdt.assert_frame_equal(best, expected)


def test_best_cells_no_metric_and_no_best():
    table = frame([(1.0, 2.0), (3.0, 0.5)], [("a", 1), ("b", 2)], [("t", "repetition"), ("t", "gzip")])
    best = best_cells(table, (REPETITION,))
    expected = pd.DataFrame(False, index=table.index, columns=table.columns)
    pdt.assert_frame_equal(best, expected)


# ---------------------------------------------------------------------------------------------------------------
# styled (the page) and to_latex (the paper)


def test_styled_page_html_exact():
    styler = styled(two_row_table(), SPEED).set_uuid("t")
    # best tok/s 30 (row 1, col 2 after strategy and k); best speedup 1.00 (row 0, col 3): NaN is not a candidate
    expected = (
        '<style type="text/css">\n'
        "#T_t_row0_col3, #T_t_row1_col2 {\n"
        "  font-weight: bold;\n"
        "}\n"
        "</style>\n"
        '<table id="T_t">\n'
        "  <thead>\n"
        "    <tr>\n"
        '      <th id="T_t_level0_col0" class="col_heading level0 col0" >strategy</th>\n'
        '      <th id="T_t_level0_col1" class="col_heading level0 col1" >k</th>\n'
        '      <th id="T_t_level0_col2" class="col_heading level0 col2" >wiki · tok/s</th>\n'
        '      <th id="T_t_level0_col3" class="col_heading level0 col3" >wiki · speedup</th>\n'
        "    </tr>\n"
        "  </thead>\n"
        "  <tbody>\n"
        "    <tr>\n"
        '      <td id="T_t_row0_col0" class="data row0 col0" >plain</td>\n'
        '      <td id="T_t_row0_col1" class="data row0 col1" >0</td>\n'
        '      <td id="T_t_row0_col2" class="data row0 col2" >10.0</td>\n'
        '      <td id="T_t_row0_col3" class="data row0 col3" >1.00x</td>\n'
        "    </tr>\n"
        "    <tr>\n"
        '      <td id="T_t_row1_col0" class="data row1 col0" >ngram</td>\n'
        '      <td id="T_t_row1_col1" class="data row1 col1" >3</td>\n'
        '      <td id="T_t_row1_col2" class="data row1 col2" >30.0</td>\n'
        '      <td id="T_t_row1_col3" class="data row1 col3" >\u2013</td>\n'
        "    </tr>\n"
        "  </tbody>\n"
        "</table>\n"
    )
    assert styler.to_html() == expected


def test_styled_page_flat_columns_keep_their_names_and_formats():
    table = pd.DataFrame(
        {"tok/s": [10.0, 30.25], "gzip": [0.5, NAN]}, index=pd.Index(["plain", "ngram"], name="strategy")
    )
    styler = styled(table, (TOKENS_PER_S, GZIP)).set_uuid("f")
    html = styler.to_html()
    # headers stay "tok/s" and "gzip"; 30.25 -> "30.2" ({:.1f}, round half to even), 0.5 -> "0.500" ({:.3f})
    assert '<th id="T_f_level0_col1" class="col_heading level0 col1" >tok/s</th>' in html
    assert '<th id="T_f_level0_col2" class="col_heading level0 col2" >gzip</th>' in html
    assert '<td id="T_f_row1_col1" class="data row1 col1" >30.2</td>' in html
    assert '<td id="T_f_row0_col2" class="data row0 col2" >0.500</td>' in html
    assert '<td id="T_f_row1_col2" class="data row1 col2" >\u2013</td>' in html
    assert "#T_f_row1_col1 {\n  font-weight: bold;\n}" in html  # gzip has no best: only tok/s is bold


def test_styled_latex_three_level_columns_format_by_last_level():
    columns = pd.MultiIndex.from_tuples([("run", "speedup", "tok/s")], names=["a", "b", "c"])
    table = pd.DataFrame([[10.0], [12.5]], index=pd.Index(["x", "y"], name="s"), columns=columns)
    latex = styled(table, SPEED, latex=True).to_latex()
    # tok/s: {:.1f} and max 12.5 in bold; had "speedup" been taken as the label it would read 12.50x
    assert latex == (
        "\\begin{tabular}{lr}\n"
        "a & run \\\\\n"
        "b & speedup \\\\\n"
        "c & tok/s \\\\\n"
        "s &  \\\\\n"
        "x & 10.0 \\\\\n"
        "y & \\textbf{12.5} \\\\\n"
        "\\end{tabular}\n"
    )


def test_to_latex_exact_with_caption_and_label():
    latex = to_latex(two_row_table(), SPEED, caption="Speed", label="tab:speed")
    assert latex == ("\\begin{table}\n\\centering\n\\caption{Speed}\n\\label{tab:speed}\n" + TWO_ROW_TABULAR)


def test_to_latex_exact_without_caption_or_label():
    latex = to_latex(two_row_table(), SPEED)
    assert latex == ("\\begin{table}\n\\centering\n" + TWO_ROW_TABULAR)


def test_to_latex_label_without_caption():
    latex = to_latex(two_row_table(), SPEED, label="tab:t")
    assert latex.startswith("\\begin{table}\n\\centering\n\\label{tab:t}\n\\begin{tabular}{llrr}\n")
    assert "\\caption" not in latex


def test_to_latex_escapes_every_special_in_both_headers():
    table = frame([(10.0, 2.0), (20.0, 1.0)], [("plain", 0), ("x_y&z", 3)], [("5%_a", "tok/s"), ("b#\\c", "tok/s")])
    latex = to_latex(table, SPEED)
    # \ -> \textbackslash{} (first, so the later escapes' backslashes stay), & -> \&, % -> \%, _ -> \_, # -> \#
    assert latex == (
        "\\begin{table}\n"
        "\\centering\n"
        "\\begin{tabular}{llrr}\n"
        "\\toprule\n"
        " & task & 5\\%\\_a & b\\#\\textbackslash{}c \\\\\n"
        " &  & tok/s & tok/s \\\\\n"
        "strategy & k &  &  \\\\\n"
        "\\midrule\n"
        "plain & 0 & 10.0 & \\textbf{2.0} \\\\\n"
        "x\\_y\\&z & 3 & \\textbf{20.0} & 1.0 \\\\\n"
        "\\bottomrule\n"
        "\\end{tabular}\n"
        "\\end{table}\n"
    )


def test_to_latex_of_an_empty_table_is_empty():
    assert to_latex(pd.DataFrame(), SPEED) == ""
    assert to_latex(pd.DataFrame(), SPEED, caption="c", label="l") == ""


@pytest.mark.parametrize(
    "raw, escaped",
    [
        ("\\", "\\textbackslash{}"),
        ("&", "\\&"),
        ("%", "\\%"),
        ("_", "\\_"),
        ("#", "\\#"),
        ("a\\b&c%d_e#f", "a\\textbackslash{}b\\&c\\%d\\_e\\#f"),
        ("plain {x} $y$", "plain {x} $y$"),  # only the five above are escaped
        (3, "3"),
    ],
)
def test_latex_escape(raw, escaped):
    assert tables._latex_escape(raw) == escaped


def test_to_csv_exact():
    table = frame([(10.0, 1.5)], [("plain", 0)], [("wiki", "tok/s"), ("wiki", "speedup")])
    assert tables.to_csv(table) == ("task,,wiki,wiki\n,,tok/s,speedup\nstrategy,k,,\nplain,0,10.0,1.5\n")


# ---------------------------------------------------------------------------------------------------------------
# break_even_frame


def test_break_even_frame_exact():
    summary = pd.DataFrame(
        [
            ("plain", "plain", "wiki", 0, "uncached", NAN, NAN, 1.0, 10.0),
            ("ngram", "ngram", "wiki", 0, "uncached", 0.1, 0.1, 0.9, 9.0),  # drafted but k = 0: no rounds
            ("plain", "plain", "wiki", 2, "uncached", 0.2, 0.2, 1.0, 10.0),  # plain draft whatever its k
            ("ngram", "ngram", "wiki", 1, "uncached", 0.75, 0.5, 1.5, 15.0),
            ("ngram", "ngram", "pubmed", 3, "cached", 0.5, 0.25, 1.25, 12.5),
            ("olifant", "olifant", "wiki", 4, "cached", 0.9, 0.6, 2.0, 20.0),
        ],
        columns=[
            "strategy",
            "draft",
            "task",
            "k",
            "regime",
            "acceptance",
            "first_token_acceptance",
            "speedup",
            "tokens_per_s",
        ],
        index=[10, 11, 12, 13, 14, 15],
    )
    out = break_even_frame(summary)
    # break_even = k / (k + 1): 1/2 = 0.5, 3/4 = 0.75, 4/5 = 0.8; margin = acceptance - break_even:
    # 0.75 - 0.5 = 0.25, 0.5 - 0.75 = -0.25, 0.9 - 0.8 = 0.1
    expected = pd.DataFrame(
        [
            ("ngram", "wiki", 1, "uncached", 0.75, 0.5, 1.5, 0.5, 0.25),
            ("ngram", "pubmed", 3, "cached", 0.5, 0.25, 1.25, 0.75, -0.25),
            ("olifant", "wiki", 4, "cached", 0.9, 0.6, 2.0, 0.8, 0.1),
        ],
        columns=[
            "strategy",
            "task",
            "k",
            "regime",
            "acceptance",
            "first_token_acceptance",
            "speedup",
            "break_even",
            "margin",
        ],
    )
    pdt.assert_frame_equal(out, expected)


# ---------------------------------------------------------------------------------------------------------------
# segment_steps, decode_segments, highlight_html, ids_segments


def test_segment_steps_stops_when_the_tokens_run_out_on_a_round_boundary():
    # round 1: 1 draft + 1 verifier = tokens 1, 2; nothing left for round 2, which adds no empty step
    assert segment_steps([1, 2], [1, 0]) == [([1], [2])]
    assert segment_steps([1, 2], [2, 0], [2, 1]) == [([1, 2], [])]
    assert segment_steps([], [1]) == []


def test_segment_steps_cut_short_and_leftovers():
    # rounds of 3 (2 drafts + verifier), 1 (verifier), then the budget ends inside round 3 after 1 draft
    assert segment_steps([1, 2, 3, 4, 5], [2, 0, 2]) == [([1, 2], [3]), ([], [4]), ([5], [])]
    # an empty tokens_per_step falls back to a + 1 per round; tokens after the rounds are one-token steps
    assert segment_steps([1, 2, 3, 4], [1], []) == [([1], [2]), ([], [3]), ([], [4])]
    assert segment_steps((7, 8, 9), [0, 0], [1, 1]) == [([], [7]), ([], [8]), ([], [9])]
    # with tokens_per_step [2, 1] round 1 is 2 accepted drafts and no verifier token (not 2 + 1 = 3 tokens)
    assert segment_steps([1, 2, 3], [2, 0], [2, 1]) == [([1, 2], []), ([], [3])]


def test_decode_segments_shows_what_each_part_adds():
    steps = [([88], [89]), ([], [90])]  # X (accepted), Y, then a verifier-only round Z
    segments = decode_segments(steps, lambda ids: "".join(map(chr, ids)))
    assert segments == [("X", True), ("Y", False), ("Z", False)]


def test_decode_segments_follows_a_rewritten_tail():
    texts = {(5,): "a?", (5, 6): "ab", (5, 6, 7): "abc"}
    seen: list[list[int]] = []

    def decode(ids):
        seen.append(list(ids))
        return texts[tuple(ids)]

    segments = decode_segments([([5], [6]), ([7], [])], decode)
    # "a?" is new; "ab" shares "a" with "a?": "b"; "abc" shares "ab": "c"; the empty verifier part is skipped
    assert segments == [("a?", True), ("b", False), ("c", True)]
    assert seen == [[5], [5, 6], [5, 6, 7]]
    assert decode_segments([], decode) == []


def test_highlight_html_exact():
    html = highlight_html([("a<b", True), (' "c" & d\n', False)])
    assert html == (
        '<div style="white-space:pre-wrap;line-height:1.7">'
        '<span class="gs-accepted" style="background:#c8f7c5;border-radius:3px">a&lt;b</span>'
        "<span> &quot;c&quot; &amp; d\n</span>"
        "</div>"
    )
    assert highlight_html([]) == '<div style="white-space:pre-wrap;line-height:1.7"></div>'


def test_ids_segments_exact():
    steps = [([1, 2], [3]), ([], [4]), ([5], []), ([], [])]
    assert ids_segments(steps) == [("1 2 ", True), ("3 ", False), ("4 ", False), ("5 ", True)]
    assert ids_segments([]) == []


# ---------------------------------------------------------------------------------------------------------------
# filter_frame (more in test_tables_filters.py)

FRAME = pd.DataFrame(
    [
        ("t1", "plain", "plain", "uncached", 0),
        ("t1", "ngram", "ngram", "uncached", 2),
        ("t1", "ngram", "ngram", "cached", 3),
        ("t2", "olifant", "olifant", "cached", 2),
        ("t2", "plain", "plain", "cached", 0),
    ],
    columns=["task", "strategy", "draft", "regime", "k"],
    index=[5, 6, 7, 8, 9],
)


def test_filter_frame_takes_any_iterables_and_keeps_the_rows_whole():
    out = filter_frame(
        FRAME, tasks=iter(["t1"]), strategies=(s for s in ["ngram", "plain"]), regimes=("uncached",), ks={2}
    )
    pdt.assert_frame_equal(out, FRAME.loc[[5, 6]])


def test_filter_frame_each_column_by_name():
    assert list(filter_frame(FRAME, tasks=["t2"]).index) == [8, 9]
    assert list(filter_frame(FRAME, strategies=["olifant"]).index) == [8]
    assert list(filter_frame(FRAME, regimes=["uncached"]).index) == [5, 6]
    assert list(filter_frame(FRAME, ks=[3]).index) == [5, 7, 9]  # plain rows (draft plain) for any k
    assert list(filter_frame(FRAME, tasks=["t1"], ks=[3]).index) == [5, 7]
    assert list(filter_frame(FRAME, tasks=["t2"], strategies=["plain"]).index) == [9]  # both, not the last alone
    pdt.assert_frame_equal(filter_frame(FRAME), FRAME)


def test_filter_frame_ks_without_a_k_column_keeps_everything():
    bare = FRAME.drop(columns=["k"])
    assert list(filter_frame(bare, ks=[3]).index) == [5, 6, 7, 8, 9]
    assert list(filter_frame(bare.drop(columns=["task"]), tasks=["t2"], regimes=["cached"]).index) == [7, 8, 9]


# ---------------------------------------------------------------------------------------------------------------
# redundancy_by_source and redundancy_table


def fake_redundancy(calls: list):
    """Stand-in for workers.metrics.redundancy recording (texts, n); n must be passed by name."""

    def redundancy(texts, *, n):
        calls.append((list(texts), n))
        return {"texts": len(texts), "repetition": len(texts) / 10, "overlap": n / 10, "gzip_ratio": 0.5}

    return redundancy


TEXTS = pd.DataFrame(
    [
        ("ngram", "wiki", 0, "w0", 2, "uncached"),
        ("ngram", "wiki", 0, "w0 again", 3, "cached"),  # same prompt again (another k and regime): dropped
        ("ngram", "wiki", 1, "w1", 2, "uncached"),
        ("bolt", "pubmed", 0, "p0", 2, "uncached"),
        ("ngram", "pubmed", 0, "np0", 2, "uncached"),
    ],
    columns=["strategy", "task", "prompt_index", "text", "k", "regime"],
)
REFERENCES = pd.DataFrame(
    [("wiki", 0, "r0", 7), ("wiki", 0, "r0 twice", 7), ("pubmed", 1, "rp1", 7)],
    columns=["task", "prompt_index", "text", "extra"],
)
FRAME_COLUMNS = ["strategy", "task", "texts", "repetition", "overlap", "gzip_ratio", "median_bytes"]


def test_redundancy_by_source_groups_each_source_and_task_once(monkeypatch):
    calls: list = []
    monkeypatch.setattr("workers.metrics.redundancy", fake_redundancy(calls))
    out = redundancy_by_source(TEXTS, REFERENCES, n=3)
    # groups sorted by (source, task); the first text of a repeated prompt is kept; overlap = n / 10 = 0.3
    assert calls == [(["p0"], 3), (["np0"], 3), (["w0", "w1"], 3), (["rp1"], 3), (["r0"], 3)]
    expected = pd.DataFrame(
        [
            ("bolt", "pubmed", 1, 0.1, 0.3, 0.5, 2.0),
            ("ngram", "pubmed", 1, 0.1, 0.3, 0.5, 3.0),
            ("ngram", "wiki", 2, 0.2, 0.3, 0.5, 2.0),
            ("reference", "pubmed", 1, 0.1, 0.3, 0.5, 3.0),
            ("reference", "wiki", 1, 0.1, 0.3, 0.5, 2.0),
        ],
        columns=FRAME_COLUMNS,
    )
    pdt.assert_frame_equal(out, expected)


def test_redundancy_by_source_without_references_and_default_n(monkeypatch):
    calls: list = []
    monkeypatch.setattr("workers.metrics.redundancy", fake_redundancy(calls))
    out = redundancy_by_source(TEXTS[TEXTS["task"] == "wiki"], pd.DataFrame())
    assert calls == [(["w0", "w1"], 4)]
    pdt.assert_frame_equal(out, pd.DataFrame([("ngram", "wiki", 2, 0.2, 0.4, 0.5, 2.0)], columns=FRAME_COLUMNS))


def test_redundancy_by_source_of_nothing_has_the_columns():
    out = redundancy_by_source(TEXTS.iloc[0:0], pd.DataFrame())
    assert list(out.columns) == FRAME_COLUMNS and len(out) == 0


def test_redundancy_by_source_with_the_real_measures():
    texts = pd.DataFrame(
        {
            "strategy": ["a", "a"],
            "task": ["t", "t"],
            "prompt_index": [0, 1],
            "text": ["one two three four one two three four", "one two three four five"],
        }
    )
    out = redundancy_by_source(texts, pd.DataFrame(), n=4)
    row = out.iloc[0]
    # text 1: 4-grams 5, distinct 4 -> 1 - 4/5 = 0.2; text 2: 2 distinct of 2 -> 0.0; mean 0.1.
    # overlap: text 1 shares "one two three four" of its 4 distinct (0.25), text 2 1 of its 2 (0.5): mean 0.375
    assert (row["strategy"], row["task"], row["texts"]) == ("a", "t", 2)
    assert row["repetition"] == pytest.approx(0.1) and row["overlap"] == pytest.approx(0.375)


def test_redundancy_table_exact():
    frame_ = pd.DataFrame(
        [
            ("zeta", "b", 2, 0.1, 0.2, 0.3),
            ("plain", "b", 2, 0.4, 0.5, 0.6),
            ("reference", "a", 1, 0.0, NAN, 0.7),
            ("alpha", "a", 3, 0.25, 0.5, 0.75),
            ("alpha", "a", 3, 0.75, 0.5, 0.25),  # a second alpha/a row: means (0.25 + 0.75) / 2 = 0.5 each
            ("plain", "a", 2, 0.2, 0.3, 0.4),
        ],
        columns=FRAME_COLUMNS[:-1],  # redundancy_table needs no sizes
    )
    table = redundancy_table(frame_, (REPETITION, OVERLAP, GZIP))
    # reference first, then plain, then the rest by name (alpha, zeta); labels replace the column names
    labels = ["repetition", "overlap", "gzip"]
    expected = pd.DataFrame(
        [
            (0.0, NAN, 0.7, NAN, NAN, NAN),
            (0.2, 0.3, 0.4, 0.4, 0.5, 0.6),
            (0.5, 0.5, 0.5, NAN, NAN, NAN),
            (NAN, NAN, NAN, 0.1, 0.2, 0.3),
        ],
        index=pd.Index(["reference", "plain", "alpha", "zeta"], name="text source"),
        columns=pd.MultiIndex.from_product([["a", "b"], labels], names=["task", None]),
    )
    pdt.assert_frame_equal(table, expected)


def test_redundancy_table_keeps_a_source_without_measures_and_ignores_other_columns():
    frame_ = pd.DataFrame(
        [
            ("ngram", "gzip_ratio", 2, 0.1, 0.2, 0.3, "two texts"),
            ("empty", "gzip_ratio", 0, NAN, NAN, NAN, "all texts empty"),
        ],
        columns=FRAME_COLUMNS[:-1] + ["note"],
    )
    table = redundancy_table(frame_, (REPETITION, GZIP))
    # the all-NaN row stays (no dropna); "note" is not a measure; a task named like a measure column
    # ("gzip_ratio") keeps its name: only the measure level is relabelled
    expected = pd.DataFrame(
        [(NAN, NAN), (0.1, 0.3)],
        index=pd.Index(["empty", "ngram"], name="text source"),
        columns=pd.MultiIndex.from_product([["gzip_ratio"], ["repetition", "gzip"]], names=["task", None]),
    )
    pdt.assert_frame_equal(table, expected)


def test_redundancy_table_of_nothing_is_empty():
    pdt.assert_frame_equal(redundancy_table(pd.DataFrame(columns=FRAME_COLUMNS), (GZIP,)), pd.DataFrame())
