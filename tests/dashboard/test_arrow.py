"""Every page, on the fixture and the live database, serialises each of its frames to Arrow as it is: Streamlit never
logs "Serialization of dataframe to Arrow table was unsuccessful. Applying automatic fixes"."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60
PAGES = ("overview", "findings", "throughput", "acceptance", "energy", "texts", "paper", "compare", "costs")
FALLBACK = ("Serialization of dataframe to Arrow table was unsuccessful", "Applying automatic fixes")


class Records(logging.Handler):
    """Every record of the `streamlit` loggers, which do not propagate to the root (caplog would miss them)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def fallbacks(self) -> list[str]:
        return [r.getMessage() for r in self.records if any(s in r.getMessage() for s in FALLBACK)]


def _streamlit_loggers() -> list[logging.Logger]:
    """Every `streamlit.*` logger made so far (each has its own level and `propagate = False`)."""
    names = [n for n in logging.Logger.manager.loggerDict if n == "streamlit" or n.startswith("streamlit.")]
    return [logging.getLogger(n) for n in names]


@pytest.fixture
def streamlit_records():
    """A handler on every `streamlit` logger at DEBUG for one test, their levels and handlers restored after."""
    from streamlit import dataframe_util  # noqa: F401 - creates the logger that reports the fallback

    handler = Records()
    loggers = {logger: logger.level for logger in _streamlit_loggers()}
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        for logger, level in loggers.items():
            logger.removeHandler(handler)
            logger.setLevel(level)


def test_the_capture_sees_a_fallback(streamlit_records):
    """The check itself: a frame mixing '' and integers (the issue's k column) is caught."""
    import pandas as pd
    from streamlit import dataframe_util

    dataframe_util.convert_pandas_df_to_arrow_bytes(pd.DataFrame({"k": [3, "", 5]}))
    assert streamlit_records.fallbacks()


@pytest.mark.parametrize("db", ["fixture_db", "live_db"])
def test_no_page_falls_back_to_automatic_fixes(request, monkeypatch, streamlit_records, db):
    monkeypatch.setenv("GREENSPEC_DB", request.getfixturevalue(db))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    for page in PAGES:
        at.switch_page(f"views/{page}.py")
        at.run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert streamlit_records.fallbacks() == [], page


def _mixed_frames_page() -> None:
    """A page of the issue's frames: k mixing integers and "" (any k), a column mixing numbers and text."""
    import pandas as pd

    from analysis import tables
    from dashboard import ui

    frame = pd.DataFrame({"strategy": ["a", "b", "c"], "k": [3, "", 5], "note": [1.5, "n/a", 2.0]})
    ui.frame_block(frame, "mixed", "mixed")
    pivot = tables.paper_table(
        pd.DataFrame(
            {
                "strategy": ["a", "b"],
                "draft": ["x", "y"],
                "task": ["t", "t"],
                "k": [3, 5],
                "regime": ["uncached", "uncached"],
                "tokens_per_s": [10.0, 12.0],
                "speedup": [1.1, 1.2],
            }
        ),
        (tables.TOKENS_PER_S, tables.SPEEDUP),
        "uncached",
    )
    ui.metric_table_block(pivot, "pivot", (tables.TOKENS_PER_S, tables.SPEEDUP), "pivot")


def test_frames_mixing_types_are_shown_as_they_are(streamlit_records):
    """The helpers every page shows its frames through type each column once (without them this logs fallbacks)."""
    at = AppTest.from_function(_mixed_frames_page, default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.dataframe) == 1 and len(at.table) == 1
    assert streamlit_records.fallbacks() == []
