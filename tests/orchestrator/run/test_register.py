"""Registration (`orchestrator.run.driver.register`): a resume of the grid an experiment registered last expands
and registers nothing again (at 10^6 cells that was most of a resume's start); any change to what the grid is made
from (its prompts, the spec) registers it in full."""

from __future__ import annotations

import shutil

from orchestrator.run import prepare as preparing
from orchestrator.run.driver import RunOptions, register
from orchestrator.run.prepare import prepare
from orchestrator.run.spec import spec_hash
from orchestrator.run.spec_paths import load_spec
from storage import store
from storage.db import open_db
from storage.models import Experiment


def _register(url: str, path, drop_stale: bool = False) -> int:
    """What `greenspec run` and `resume` do before their first Ray call; the cells added."""
    spec, text = load_spec(path), path.read_text()
    spec, _, grid = prepare(spec, store.registered_digest(url, spec.experiment.name))
    engine, Session = open_db(url)
    try:
        return register(spec, grid, (text, str(path)), Session, False, RunOptions(db_url=url, drop_stale=drop_stale))[1]
    finally:
        engine.dispose()


def test_a_resume_of_the_registered_grid_expands_nothing_and_a_changed_one_registers_in_full(
    tmp_path, write_spec, text_files, monkeypatch
):
    task = tmp_path / "task.txt"
    shutil.copy(text_files[1], task)
    path = write_spec(**{str(text_files[1]): str(task)})
    url = f"sqlite:///{tmp_path / 'g.db'}"
    assert store.registered_digest(url, "t") is None  # no database yet: nothing created by asking
    assert not (tmp_path / "g.db").exists()
    first = _register(url, path)
    assert first > 0 and store.registered_digest(url, "t")

    expanded = []
    with monkeypatch.context() as m:  # the same grid again: no key expanded, no cell read or written
        m.setattr(store, "add_cells", lambda *a: expanded.append("add_cells") or 0)
        m.setattr(store, "stale_cells", lambda *a: expanded.append("stale_cells") or [])
        m.setattr(preparing, "check_unique_keys", lambda *a: expanded.append("check_unique_keys"))
        assert _register(url, path) == 0 and expanded == []

    task.write_text("A new first document about something else entirely, " * 5 + "\n\n" + task.read_text())
    assert _register(url, path, drop_stale=True) > 0  # a new first prompt: a new grid, registered in full
    path.write_text(path.read_text().replace("k = [2, 3]", "k = [2, 3, 4]"))
    assert _register(url, path) > 0  # another spec: the same
    _, Session = open_db(url)
    with Session() as s:
        exp = s.query(Experiment).one()
        assert exp.spec_hash == spec_hash(path.read_text()) and exp.grid_digest == store.registered_digest(url, "t")
