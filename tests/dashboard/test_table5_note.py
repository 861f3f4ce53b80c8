"""The note under Table 5 when its texts are too short for a gzip ratio to mean anything (before, ratios
of 1.17-1.22 on 16-token texts, unexplained)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from analysis import tables
from storage.db import sqlite_path
from tests.dashboard.populate import populate

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60
SIXTEEN_TOKENS = "The castle was built in the twelfth century by the Norman lords of the valley"  # ~75 bytes


def test_no_note_for_texts_long_enough():
    assert tables.gzip_note(pd.DataFrame({"median_bytes": [450.0, 520.0]})) is None
    assert tables.gzip_note(pd.DataFrame({"median_bytes": [float(tables.GZIP_MIN_BYTES)]})) is None
    assert tables.gzip_note(pd.DataFrame()) is None
    assert tables.gzip_note(pd.DataFrame({"gzip_ratio": [0.5]})) is None  # a frame without sizes says nothing


def test_note_for_short_texts_states_the_threshold_and_why():
    note = tables.gzip_note(pd.DataFrame({"median_bytes": [70.0, 80.0, 300.0]}))
    assert note.startswith("The texts are short (median 80 bytes)")
    assert f"Below {tables.GZIP_MIN_BYTES} bytes" in note and "10-byte header" in note and "8-byte trailer" in note


def test_sixteen_token_texts_have_gzip_ratios_above_one_and_get_the_note():
    """What the users saw: per-text gzip ratios above 1 on short texts; the frame's sizes now carry the note."""
    texts = pd.DataFrame(
        {
            "strategy": ["ngram"] * 3,
            "task": ["wikitext"] * 3,
            "prompt_index": [0, 1, 2],
            "text": [SIXTEEN_TOKENS, SIXTEEN_TOKENS.upper(), SIXTEEN_TOKENS[::-1]],
        }
    )
    frame = tables.redundancy_by_source(texts, pd.DataFrame())
    assert frame["gzip_ratio"].iloc[0] > 1 and frame["median_bytes"].iloc[0] == len(SIXTEEN_TOKENS)
    assert tables.gzip_note(frame) is not None


def test_texts_page_shows_the_note_under_table5_of_short_texts(monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path / 'short.db'}"
    populate(url)
    with sqlite3.connect(sqlite_path(url)) as conn:  # every text cut to ~16 tokens, as the users' demo texts were
        conn.execute("UPDATE generations SET text = substr(text, 1, 75)")
        conn.execute('UPDATE "references" SET text = substr(text, 1, 75)')
    monkeypatch.setenv("GREENSPEC_DB", url)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("views/texts.py")
    at.run()
    deadline = time.monotonic() + TIMEOUT_S  # Table 5 is computed in the background
    while not at.table and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
    assert at.table and not at.exception
    notes = [w.value for w in at.warning]
    assert len(notes) == 1 and notes[0].startswith("The texts are short (median 75 bytes)")
