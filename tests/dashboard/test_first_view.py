"""A page's first view: the titled navigation from the first run, the title and a reading note before any read, and
one line (no traceback) for a database greenspec cannot read."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from streamlit.runtime.scriptrunner import script_runner
from streamlit.testing.v1 import AppTest

from dashboard import app as entry

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60


def _first_run(monkeypatch, url: str, page: str | None = None) -> AppTest:
    monkeypatch.setenv("GREENSPEC_DB", url)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    if page is not None:
        at.switch_page(f"views/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_no_pages_folder_beside_the_entry():
    """A `pages/` folder beside app.py makes Streamlit draw a navigation of file names before `st.navigation` runs."""
    assert not (Path(APP).parent / "pages").exists()
    assert all((entry.PAGES_DIR / name).is_file() for name, _, _ in entry.PAGES)


def test_the_first_run_never_draws_the_file_navigation(monkeypatch, fixture_db):
    """Streamlit's pages-folder mode (`_mpa_v1`, the raw "app, acceptance, costs, ..." list) never runs."""
    calls = []
    real = script_runner._mpa_v1
    monkeypatch.setattr(script_runner, "_mpa_v1", lambda path: (calls.append(path), real(path)))
    at = _first_run(monkeypatch, fixture_db)
    assert calls == [] and at.title[0].value == "Overview"


@pytest.mark.parametrize("page,title", [(p.removesuffix(".py"), t) for p, t, _ in entry.PAGES])
def test_first_view_shows_title_then_the_reading_note(monkeypatch, fixture_db, page, title):
    at = _first_run(monkeypatch, fixture_db, None if page == "overview" else page)
    assert at.title[0].value == title
    assert re.fullmatch(r"60 generations of \*\*fixture\*\* · read in \d+\.\d s", at.main.caption[0].value)


def test_title_and_note_come_before_the_first_read(monkeypatch, fixture_db):
    """Were the filters' reads to hang, the page would still show its title and "Reading the database…"."""
    from dashboard import ui

    def stuck(url):
        raise TimeoutError("the reads have not come back")

    monkeypatch.setattr(ui, "sidebar_filters", stuck)
    monkeypatch.setenv("GREENSPEC_DB", fixture_db)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("views/energy.py")
    at.run()
    assert at.exception and "the reads have not come back" in str(at.exception[0].value)
    assert at.title[0].value == "Energy" and at.main.caption[0].value == "Reading the database…"


def test_a_file_that_is_not_sqlite_gets_one_line(monkeypatch, tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 50)
    at = _first_run(monkeypatch, f"sqlite:///{path}")
    assert [e.value for e in at.error] == [f"{path}: not a SQLite database (file is not a database)"]
    assert not at.exception and not at.table and not at.dataframe


def test_another_programs_database_gets_one_line(monkeypatch, tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE cells (x INTEGER)")
        conn.execute("CREATE TABLE invoices (y TEXT)")
    at = _first_run(monkeypatch, f"sqlite:///{path}")
    assert [e.value for e in at.error] == [
        f"{path}: not a greenspec database (its tables: cells, invoices); give another --db"
    ]
    assert "\n" not in at.error[0].value and not at.exception
