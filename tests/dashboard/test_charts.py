"""Plotly figures: the right series, the break-even line, the measured/estimated label in titles."""

from __future__ import annotations

import pandas as pd
import pytest

from dashboard import charts
from storage.db import open_db
from storage.queries import generations_frame, power_frame, status_counts, summary_frame
from tests.dashboard.populate import EXPERIMENT


@pytest.fixture(scope="module")
def frames(fixture_db) -> dict[str, pd.DataFrame]:
    """The fixture's summary, generations, power samples and queue counts, read once."""
    _, Session = open_db(fixture_db, migrate=False)
    with Session() as s:
        return {"summary": summary_frame(s, EXPERIMENT), "gens": generations_frame(s, 1),
                "power": power_frame(s, 1), "status": status_counts(s, EXPERIMENT)}


def _names(fig) -> set[str]:
    return {t.name for t in fig.data if t.showlegend is not False}


def test_speedup_vs_k_has_a_line_per_strategy_and_break_even(frames):
    fig = charts.speedup_vs_k(frames["summary"])
    assert _names(fig) == {"ngram", "olifant-wikitext"}  # plain is the 1.0 line, not a series
    assert any(s.y0 == 1.0 and s.y1 == 1.0 for s in fig.layout.shapes)
    assert {a.text for a in fig.layout.annotations} >= {"uncached", "cached"}
    assert len(fig.data) == 4  # 2 strategies x 2 regimes


def test_acceptance_vs_k_draws_k_over_k_plus_one(frames):
    fig = charts.acceptance_vs_k(frames["summary"])
    curve = next(t for t in fig.data if t.name == "break-even k/(k+1)")
    assert list(curve.y) == pytest.approx([k / (k + 1) for k in curve.x])


def test_accepted_length_histogram_shares_sum_to_one(frames):
    fig = charts.accepted_length_hist(frames["gens"])
    for trace in fig.data:
        assert sum(trace.y) == pytest.approx(1.0)
    assert {a.text for a in fig.layout.annotations} == {"k=3", "k=5"}


def test_tokens_per_joule_ladder_keeps_best_k_per_strategy(frames):
    summary = frames["summary"]
    fig = charts.tokens_per_joule_ladder(summary, "measured (nvml)")
    assert "measured (nvml)" in fig.layout.title.text
    bars = [(name, x) for t in fig.data for name, x in zip(t.y, t.x)]
    assert len(bars) == 6  # 3 strategies x 2 regimes, one bar each
    olifant = summary[(summary["strategy"] == "olifant-wikitext") & (summary["regime"] == "uncached")]
    best = olifant.groupby("k")["tokens_per_j"].mean()
    assert any(name == f"olifant-wikitext (k={best.idxmax()})" for name, _ in bars)


def test_power_trace_and_power_vs_k(frames):
    gen = frames["gens"].iloc[0]
    window = frames["power"][frames["power"]["t_s"].between(gen["started_at"] - 1, gen["ended_at"] + 1)]
    fig = charts.power_trace(window, gen["started_at"], gen["ended_at"], "measured (nvml)")
    assert fig.layout.shapes[0].x1 == pytest.approx(gen["ended_at"] - gen["started_at"])
    assert len(fig.data[0].x) == len(window)
    assert "estimated" in charts.power_vs_k(frames["summary"], "estimated (estimate)").layout.title.text


def test_queue_progress_stacks_states(frames):
    fig = charts.queue_progress(frames["status"])
    by_state = {t.name: sum(t.x) for t in fig.data}
    assert by_state["done"] == 67 and by_state["failed"] == 1
