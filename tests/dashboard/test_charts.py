"""Plotly figures: the right series and values (hand-computed on tests/storage/known.py), break-even lines, labels."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.summary import summary_frame
from dashboard import charts
from greenspec.status import kind_groups
from storage import browse
from storage.db import open_db
from storage.queries import power_frame, status_counts
from tests.dashboard.populate import EXPERIMENT
from tests.storage import known


@pytest.fixture(scope="module")
def frames(fixture_db) -> dict[str, pd.DataFrame]:
    """The fixture's summary, one generation, power samples and queue counts, read once."""
    _, Session = open_db(fixture_db, migrate=False)
    with Session() as s:
        return {
            "summary": summary_frame(s, EXPERIMENT),
            "gen": browse.generation_detail(s, 1),
            "power": power_frame(s, 1),
            "status": status_counts(s, EXPERIMENT),
        }


@pytest.fixture(scope="module")
def hand(tmp_path_factory) -> dict[str, pd.DataFrame]:
    """The hand-made database's summary and accepted-length counts."""
    url = f"sqlite:///{tmp_path_factory.mktemp('known') / 'known.db'}"
    known.build(url)
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        return {"summary": summary_frame(s, known.EXPERIMENT), "counts": browse.accepted_length_counts(s, 1, 3)}


def _names(fig) -> set[str]:
    return {t.name for t in fig.data if t.showlegend is not False}


def _trace(fig, name: str, regime_col: int | None = None):
    """The trace called `name` (in facet column `regime_col`: 1 uncached, 2 cached)."""
    axis = {None: None, 1: "x", 2: "x2"}[regime_col]
    return next(t for t in fig.data if t.name == name and (axis is None or t.xaxis == axis))


def test_figure1_speedup_vs_k_values(hand):
    fig = charts.speedup_vs_k(hand["summary"])
    assert _names(fig) == {"ngram"}  # plain is the 1.0 line, not a series
    assert any(s.y0 == 1.0 and s.y1 == 1.0 for s in fig.layout.shapes)
    uncached = _trace(fig, "ngram", 1)
    # k=2: 15 / 6.25; k=3 ran prompt 0 only, paired with plain's prompt 0: 12.5 / 10
    assert list(uncached.x) == [2, 3] and list(uncached.y) == pytest.approx([2.4, 1.25])
    assert list(_trace(fig, "ngram", 2).y) == pytest.approx([1.25])  # 25 / 20
    assert {a.text for a in fig.layout.annotations} >= {"uncached", "cached"}
    # one task: error bars are the 95% intervals over prompts, k=2 [2.0, 4.0] (tests/analysis/test_summary_versions.py)
    assert uncached.error_y.array[0] == pytest.approx(4.0 - 2.4) and uncached.error_y.arrayminus[0] == pytest.approx(
        0.4
    )
    assert pd.isna(uncached.error_y.array[1])  # one prompt: no interval
    assert "95% intervals over prompts" in fig.layout.title.text
    two_tasks = pd.concat([hand["summary"], hand["summary"].assign(task="u")])
    assert charts.speedup_vs_k(two_tasks).data[0].error_y.array is None  # a mean over tasks: no bars
    assert "pick one task" in charts.speedup_vs_k(two_tasks).layout.title.text


def test_break_even_chart_shows_acceptance_and_first_token_acceptance(hand):
    fig = charts.acceptance_vs_k(hand["summary"])
    assert list(_trace(fig, "ngram", 1).y) == pytest.approx([(0.5 + 3 / 14) / 2, 0.5])  # k=2: mean of 5/10, 3/14
    assert list(_trace(fig, "ngram", 1).error_y.array)[0] == pytest.approx(0.5 - (0.5 + 3 / 14) / 2)  # up to 5/10
    first = _trace(fig, "ngram first-token", 1)
    assert list(first.y) == pytest.approx([(3 / 5 + 3 / 7) / 2, 0.5])  # (rounds - hist[0]) / rounds, per prompt
    assert first.error_y.arrayminus[0] == pytest.approx((3 / 5 + 3 / 7) / 2 - 3 / 7)  # down to prompt 1's 3/7
    assert list(_trace(fig, "ngram first-token", 2).y) == pytest.approx([2 / 3])  # 1 - 2 rejects / 6 drafted rounds
    curve = _trace(fig, "break-even k/(k+1)", 1)
    assert list(curve.y) == pytest.approx([k / (k + 1) for k in curve.x])


def test_accepted_length_histogram_shares(hand):
    fig = charts.accepted_length_hist(hand["counts"])
    shares = {
        (t.name, a.text): list(t.y)
        for t in fig.data
        for a in fig.layout.annotations
        if (t.xaxis == "x" and a.text == "k=2") or (t.xaxis == "x2" and a.text == "k=3")
    }
    assert shares[("ngram", "k=2")] == pytest.approx([9 / 19, 5 / 19, 5 / 19])  # rounds [9, 5, 5] of 19
    assert shares[("ngram", "k=3")] == pytest.approx([0.5, 0.0, 0.0, 0.5])  # rounds [2, 0, 0, 2] of 4


def test_figure2_ranks_both_regimes_in_one_ladder(hand):
    fig = charts.tokens_per_joule_ladder(hand["summary"], "measured (nvml)")
    assert "measured (nvml)" in fig.layout.title.text
    bars = {name: x for t in fig.data for name, x in zip(t.y, t.x)}
    # best k per strategy and regime; tokens/J = 100 / (J per 100 tokens): ngram k=2 (100/500) beats k=3 (100/800)
    assert bars == pytest.approx(
        {"plain, uncached": 0.05, "ngram (k=2), uncached": 0.2, "ngram (k=2), cached": 1 / 3, "plain, cached": 0.5}
    )
    assert list(fig.layout.yaxis.categoryarray) == [
        "plain, uncached",
        "ngram (k=2), uncached",
        "ngram (k=2), cached",
        "plain, cached",
    ]  # ranked, one axis
    assert {t.name for t in fig.data} == {"uncached", "cached"}


def test_power_trace_and_power_vs_k(frames):
    gen = frames["gen"]
    window = frames["power"][frames["power"]["t_s"].between(gen["started_at"] - 1, gen["ended_at"] + 1)]
    fig = charts.power_trace(window, gen["started_at"], gen["ended_at"], "measured (nvml)")
    assert fig.layout.shapes[0].x1 == pytest.approx(gen["ended_at"] - gen["started_at"])
    assert len(fig.data[0].x) == len(window)
    assert "estimated" in charts.power_vs_k(frames["summary"], "estimated (estimate)").layout.title.text


def test_queue_progress_stacks_states(frames):
    fig = charts.queue_progress(kind_groups(frames["status"]))
    by_state = {t.name: sum(t.x) for t in fig.data}
    assert by_state["done"] == 67 and by_state["failed"] == 1
