"""Names are part of the identity: a renamed task or strategy lists its results under its new name (its plain runs
with it), and an experiment name bound to another spec file is refused unless `--new-version`."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from sqlalchemy import func, select

from storage.db import open_db
from storage.models import Cell, Generation, Reference
from tests.orchestrator.conftest import cli, small_spec
from tests.orchestrator.run.test_reliability_inputs import one_line_error

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]

RENAMED = {'[[tasks]]\nname = "pydoc"': '[[tasks]]\nname = "docs"', 'name = "olifant-pydoc"': 'name = "olifant-docs"'}


def _names(url: str) -> dict[str, set]:
    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        out = {
            "cell tasks": set(s.scalars(select(Cell.task).where(Cell.kind != "train"))),
            "cell strategies": set(s.scalars(select(Cell.strategy).where(Cell.kind == "sweep"))),
            "generation tasks": set(s.scalars(select(Generation.task))),
            "generation strategies": set(s.scalars(select(Generation.strategy))),
            "reference tasks": set(s.scalars(select(Reference.task))),
            "cells": {s.scalar(select(func.count(Cell.id)))},
        }
    engine.dispose()
    return out


def test_renamed_task_and_strategy_and_an_experiment_bound_to_another_file(write_spec, tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    assert cli("--db", url, "run", str(small_spec(write_spec, [2])))[0] == 0
    before = _names(url)
    assert before["generation tasks"] == {"pydoc"} and before["generation strategies"] == {"plain", "olifant-pydoc"}

    # the same spec renamed, in its own file: refused by name, nothing written
    other = tmp_path / "other" / "t.toml"
    other.parent.mkdir()
    other.write_text(small_spec(write_spec, [2], **RENAMED).read_text())
    code, _, err = cli("--db", url, "run", str(other))
    one_line_error(code, err, "experiment 't' is bound to another spec file", "--new-version")
    assert _names(url) == before

    # renamed in its own file: no cell runs again, every stored row takes the new names, export lists them
    code, out, err = cli("--db", url, "run", str(small_spec(write_spec, [2], **RENAMED)))
    assert code == 0 and "(0 new cells" in out, err
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "task 'pydoc' is now 'docs'" in said and "strategy 'olifant-pydoc' is now 'olifant-docs'" in said
    after = _names(url)
    assert after["cells"] == before["cells"]
    for key in ("cell tasks", "generation tasks", "reference tasks"):
        assert after[key] == {"docs"}, key
    assert after["generation strategies"] == {"plain", "olifant-docs"}
    code, csv, err = cli("--db", url, "export")
    assert code == 0, err
    table = pd.read_csv(io.StringIO(csv))
    olifant = table[table["strategy"] == "olifant-docs"]
    assert set(table["task"]) == {"docs"} and len(olifant) == 1 and olifant["speedup"].notna().all()

    # --new-version continues the experiment under the other file (nothing new to run)
    other.write_text(small_spec(write_spec, [2]).read_text())
    code, out, err = cli("--db", url, "run", "--new-version", str(other))
    assert code == 0 and "(0 new cells" in out, err
    assert _names(url)["generation tasks"] == {"pydoc"}
