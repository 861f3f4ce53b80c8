"""`greenspec status` counts a replayed run's cells by kind and state, groups identical failure lines, refuses a
database file that does not exist, and hints at the fourth slash of an absolute SQLite path."""

from __future__ import annotations

import json

from sqlalchemy import update

from storage import store
from storage.cell_spec import CellParams, CellSpec
from storage.db import open_db
from storage.models import Cell
from tests.orchestrator.conftest import cli


def replayed_run(url: str) -> None:
    """A replayed run as stored: 2 training cells, 3 label cells (all failed alike), 2 references, 6 replayed cells
    (done), 2 timed ones (pending) and a cost-model cell (running)."""

    def cell(key: str, kind: str, **kw) -> CellSpec:
        return CellSpec(key=key, kind=kind, params=CellParams(prompt=kw.pop("prompt", None)), **kw)

    cells = [
        cell("tr0", "train", corpus="c"),
        cell("ds0", "datastore", corpus="c"),
        *(cell(f"lb{i}", "label", corpus="d") for i in range(3)),
        cell("cm", "costmodel"),
        *(cell(f"ref{i}", "reference", task="t", prompt_index=i, prompt=f"p{i}") for i in range(2)),
        *(cell(f"rp{i}", "replay", strategy="ngram", task="t", prompt_index=i % 2, k=3 + i // 2) for i in range(6)),
        *(cell(f"sw{i}", "sweep", strategy="ngram", task="t", prompt_index=i, k=3, regime="cached") for i in range(2)),
    ]
    engine, Session = open_db(url)
    with Session() as s:
        spec = '[experiment]\nname = "r"\ntags = ["pilot-b", "code"]\nnotes = """olifant on code,\n two lines"""\n'
        exp = store.upsert_experiment(s, "r", spec, "", None)
        store.add_cells(s, exp.id, cells)
        s.flush()
        done = ("tr0", "ds0", "ref0", "ref1", *(f"rp{i}" for i in range(6)))
        s.execute(update(Cell).where(Cell.key.in_(done)).values(state="done"))
        s.execute(update(Cell).where(Cell.key == "cm").values(state="running"))
        failed = dict(state="failed", error="ConnectError: Name or service not known\nmore")
        s.execute(update(Cell).where(Cell.kind == "label").values(**failed))
        s.commit()
    engine.dispose()


def test_status_counts_a_replayed_run_by_kind_and_state(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    replayed_run(url)
    code, out, err = cli("--db", url, "status")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "r: cells 10 done, 1 running, 2 pending, 3 failed; 0 generations stored"
    assert lines[1:3] == ["  tags: pilot-b, code", "  notes: olifant on code, two lines"]  # the spec's, one line each
    lines = lines[:1] + lines[3:]
    assert lines[1:7] == [
        "  training: 2 done, 0 running, 0 pending, 0 failed",
        "  label: 0 done, 0 running, 0 pending, 3 failed",
        "  costmodel: 0 done, 1 running, 0 pending, 0 failed",
        "  reference: 2 done, 0 running, 0 pending, 0 failed",
        "  replay: 6 done, 0 running, 0 pending, 0 failed",
        "  timed: 0 done, 0 running, 2 pending, 0 failed",
    ]
    # three label cells of one corpus failed alike: one line with its count
    assert lines[7:] == ["  failed cells:", "    label d: ConnectError: Name or service not known (3 cells)"]
    code, out, _ = cli("--db", url, "status", "--json")
    data = json.loads(out)
    assert (data["experiments"]["r"]["tags"], data["experiments"]["r"]["notes"]) == (
        ["pilot-b", "code"],
        "olifant on code,\n two lines",
    )
    assert data["kinds"]["replay"] == {"pending": 0, "running": 0, "done": 6, "failed": 0}
    assert data["kinds"]["training"]["done"] == 2 and data["experiments"]["r"]["kinds"]["timed"]["pending"] == 2
    assert sum(sum(c.values()) for c in data["kinds"].values()) == sum(data["cells"].values()) == 16


def test_status_on_a_database_file_that_does_not_exist_says_so(tmp_path):
    for args in (["status"], ["status", "--json"], ["status", "-e", "demo"]):
        code, out, err = cli("--db", f"sqlite:///{tmp_path / 'none.db'}", *args)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert f"no database at {tmp_path / 'none.db'}" in err and "greenspec run SPEC" in err
    assert "so no experiment 'demo'" in err and not (tmp_path / "none.db").exists()


def test_a_relative_sqlite_path_in_a_missing_folder_gets_the_fourth_slash_hint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # ./tmp does not exist here; /tmp does
    code, _, err = cli("--db", "sqlite:///tmp/x.db", "status")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "folder tmp does not exist" in err and "for /tmp/x.db write sqlite:////tmp/x.db (four slashes)" in err
    code, _, err = cli("--db", f"sqlite:///{tmp_path}/nope/x.db", "status")  # an absolute path: no hint
    assert code == 2 and "four slashes" not in err
