"""`storage.names.renames` streams the grid in chunks and finds every stored cell the spec makes under a new name."""

from __future__ import annotations

import pytest

from storage import names, store
from storage.cell_spec import CellParams, CellSpec
from storage.db import open_db


@pytest.fixture
def session(tmp_path):
    _, Session = open_db(f"sqlite:///{tmp_path / 'n.db'}")
    with Session() as s:
        yield s


def grid(n: int, task: str):
    return (CellSpec(key=f"c{i}", kind="sweep", task=task, params=CellParams(prompt="p")) for i in range(n))


def test_renames_are_found_across_chunks_and_none_in_an_empty_experiment(session, monkeypatch):
    monkeypatch.setattr(names, "_CHUNK", 3)  # 8 cells: chunks of 3, 3 and 2
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    assert names.renames(session, exp.id, grid(8, "new")) == {}  # nothing stored yet
    store.add_cells(session, exp.id, grid(8, "old"))
    found = names.renames(session, exp.id, grid(9, "new"))  # c8 is new: not a rename
    assert list(found) == [("task", "old", "new")] and len(found[("task", "old", "new")]) == 8
    (done,) = names.rename_cells(session, exp.id, grid(8, "new"))
    assert (done.field, done.old, done.new, done.cells) == ("task", "old", "new", 8)
    assert names.renames(session, exp.id, grid(8, "new")) == {}
