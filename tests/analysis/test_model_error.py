"""The cost table's validated error inside replayed speed intervals (`analysis.model_error`), worked out by hand with
constant errors (whose bootstrap interval is the value itself), and through `summary_frame` on a real SQLite file."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.model_error import MIN_PAIRS, error_bounds, median_interval, with_model_error
from analysis.summary import summary_frame
from tests.storage.test_validation import session, validated  # noqa: F401 (fixtures)

PAIRS = pd.DataFrame(
    [("cached", "k 2-4", 0.10)] * 3 + [("cached", "plain", -0.05)] * 3 + [("cached", "k 5+", 0.3)] * (MIN_PAIRS - 1),
    columns=["regime", "band", "bias"],
)
FIGURES = {
    "tokens_per_s": (10.0, 20.0),
    "speedup": (1.2, 1.5),
    "energy_ratio": (1.1, 1.4),
    "j_per_100_tokens": (5.0, 6.0),
}


def row(strategy: str, k: int, measure: str = "replay", note=None) -> dict:
    bounds = {f"{name}_{b}": v for name, (lo, hi) in FIGURES.items() for b, v in (("lo", lo), ("hi", hi))}
    return {"strategy": strategy, "k": k, "regime": "cached", "measure": measure, "note": note, **bounds}


def test_error_bounds_need_min_pairs_and_hold_the_median():
    bounds = error_bounds(PAIRS)
    assert set(bounds) == {("cached", "k 2-4"), ("cached", "plain")}  # k 5+ has too few pairs
    assert bounds[("cached", "k 2-4")] == pytest.approx((math.log(1.1), math.log(1.1), 3))
    values = np.log1p(np.array([-0.2, 0.0, 0.1, 0.15, 0.3]))
    lo, hi = median_interval(values)
    assert values.min() <= lo <= np.median(values) <= hi <= values.max()
    assert error_bounds(PAIRS.iloc[:0]) == {}


def test_replayed_rows_are_widened_by_their_bands_error_by_hand():
    df = pd.DataFrame([row("ngram", 3, note="few prompts"), row("plain", 0), row("ngram", 8), row("ngram", 3, "timed")])
    out = with_model_error(df, error_bounds(PAIRS))
    ngram, plain, long, timed = (out.iloc[i] for i in range(4))
    # tokens/s: the truth is the prediction / 1.1; ratios to plain: / (1.1 / 0.95); J per 100 tokens: x 1.1
    assert (ngram["tokens_per_s_lo"], ngram["tokens_per_s_hi"]) == pytest.approx((10 / 1.1, 20 / 1.1))
    assert (ngram["speedup_lo"], ngram["speedup_hi"]) == pytest.approx((1.2 * 0.95 / 1.1, 1.5 * 0.95 / 1.1))
    assert ngram["energy_ratio_hi"] == pytest.approx(1.4 * 0.95 / 1.1)
    assert (ngram["j_per_100_tokens_lo"], ngram["j_per_100_tokens_hi"]) == pytest.approx((5.5, 6.6))
    assert ngram["note"].startswith("few prompts; replayed speed interval includes the cost table's error (k 2-4:")
    assert "+10.0% to +10.0%, 3 pairs" in ngram["note"]
    # plain: its tokens/s by its own error, its speedup (1 by definition) untouched
    assert plain["tokens_per_s_lo"] == pytest.approx(10 / 0.95) and plain["speedup_lo"] == 1.2
    # k 5+: no validated error, no interval
    assert all(math.isnan(long[f"{n}_{b}"]) for n in FIGURES for b in ("lo", "hi"))
    assert "no validated model error for cached k 5+" in long["note"]
    assert timed["speedup_lo"] == 1.2 and pd.isna(timed["note"])  # measured: nothing to add


def test_the_export_table_carries_the_error(session, validated):  # noqa: F811
    df = summary_frame(session, "e")
    replayed = df[(df["measure"] == "replay") & (df["regime"] == "cached")]
    assert len(replayed) and replayed["note"].str.contains("cost table's error").all()
    assert not df[df["measure"] == "timed"]["note"].fillna("").str.contains("cost table").any()
