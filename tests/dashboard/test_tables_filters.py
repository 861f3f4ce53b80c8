"""`filter_frame` on a hand-made frame: each selection alone, selections combined, plain kept for any k."""

from __future__ import annotations

import pandas as pd

from analysis.tables import filter_frame

FRAME = pd.DataFrame(
    [
        ("t1", "plain", "plain", "uncached", 0),
        ("t1", "ngram", "ngram", "uncached", 2),
        ("t1", "ngram", "ngram", "cached", 3),
        ("t2", "olifant", "olifant", "cached", 2),
        ("t2", "plain", "plain", "cached", 0),
    ],
    columns=["task", "strategy", "draft", "regime", "k"],
)


def rows(**chosen) -> list[int]:
    return list(filter_frame(FRAME, **chosen).index)


def test_each_selection_alone():
    assert rows(tasks=["t2"]) == [3, 4]
    assert rows(strategies=["ngram"]) == [1, 2]
    assert rows(regimes=["cached"]) == [2, 3, 4]
    assert rows(ks=[2]) == [0, 1, 3, 4]  # plain rows (k = 0) stay: they are the reference
    assert rows() == [0, 1, 2, 3, 4]


def test_selections_combine():
    assert rows(strategies=["ngram"], regimes=["cached"]) == [2]
    assert rows(tasks=["t2"], strategies=["plain"]) == [4]
    assert rows(tasks=["t1"], regimes=["uncached"], ks=[2]) == [0, 1]
    assert rows(strategies=["olifant", "plain"], regimes=["uncached"]) == [0]


def test_columns_a_frame_lacks_are_not_filtered_on():
    bare = FRAME.drop(columns=["draft", "regime"])
    assert list(filter_frame(bare, ks=[2]).index) == [1, 3]  # no draft column: nothing marks plain
    assert list(filter_frame(bare, regimes=["cached"]).index) == [0, 1, 2, 3, 4]
