"""The Cost model page: the stored pass-cost curves as a chart and a table, or a hint when none was measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from workers.costcurve import PassCosts, save_curve

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60


def open_page(url: str, cache: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("GREENSPEC_DB", url)
    monkeypatch.setenv("GREENSPEC_CACHE", str(cache))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.switch_page("pages/costs.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_cost_page_shows_the_stored_curves(fixture_db, tmp_path, monkeypatch):
    url = fixture_db
    cache = tmp_path / "cache"
    save_curve(
        PassCosts(
            "smollm2-135m:torch.float32",
            "cpu",
            "cached",
            60,
            (0.030, 0.030, 0.036, 0.042),
            measured=(0.031, 0.029, 0.036, 0.043),
        ),
        cache / "cost-curves",
    )
    save_curve(
        PassCosts("smollm2-135m:torch.float32", "cpu", "uncached", 60, (0.200, 0.201, 0.203, 0.204)),
        cache / "cost-curves",
    )
    at = open_page(url, cache, monkeypatch)
    assert at.title[0].value == "Cost model"
    table = at.dataframe[0].value
    assert set(table["regime"]) == {"cached", "uncached"} and len(table) == 8
    cached = table[table["regime"] == "cached"].set_index("n")
    assert cached.loc[3, "relative"] == pytest.approx(1.4) and cached.loc[3, "pass_ms"] == pytest.approx(42.0)
    assert cached.loc[3, "measured_ms"] == pytest.approx(43.0)
    flat = table[table["regime"] == "uncached"].set_index("n")
    assert flat.loc[1, "break_even"] < cached.loc[2, "break_even"]  # a flat curve pays at lower acceptance


def test_cost_page_without_curves_says_how_to_get_one(fixture_db, tmp_path, monkeypatch):
    at = open_page(fixture_db, tmp_path / "empty", monkeypatch)
    assert 'k = "auto" measures one' in at.info[0].value
