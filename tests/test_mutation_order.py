"""`make mutation`'s pytest plugin runs a mutant's tests whole file after whole file, the quickest files first."""

from __future__ import annotations

from dataclasses import dataclass

from bench.mutation_widen import by_file


@dataclass
class Item:
    nodeid: str


def test_files_stay_whole_in_their_own_order_quickest_mean_first():
    # mutmut hands the tests over as a set: files interleaved
    items = [
        Item("mutants/tests/slow.py::a"),
        Item("tests/quick.py::x"),
        Item("mutants/tests/slow.py::b"),
        Item("tests/quick.py::y"),
        Item("tests/unknown.py::z"),
    ]
    durations = {
        "tests/slow.py::a": 2.0,
        "tests/slow.py::b": 4.0,  # mean 3.0
        "tests/quick.py::x": 0.5,
        "tests/quick.py::y": 1.5,
    }  # mean 1.0; unknown.py: none recorded, 0
    order = [i.nodeid for i in by_file(items, durations)]
    assert order == [
        "tests/unknown.py::z",
        "tests/quick.py::x",
        "tests/quick.py::y",
        "mutants/tests/slow.py::a",
        "mutants/tests/slow.py::b",
    ]


def test_without_timings_files_keep_the_order_they_first_appear_in():
    items = [Item("tests/b.py::1"), Item("tests/a.py::1"), Item("tests/b.py::2")]
    assert [i.nodeid for i in by_file(items, {})] == ["tests/b.py::1", "tests/b.py::2", "tests/a.py::1"]
