"""The bootstrap over prompts and the three-valued verdict (`analysis.stats`) on data worked out by hand.

Two prompts resampled twice each give three outcomes: both draws the first prompt (probability 1/4), one of each
(1/2), both the second (1/4). With 2,000 resamples each outcome is drawn far more often than the 2.5% tails hold,
so the 95% percentile interval runs from the smallest outcome to the largest.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from analysis.stats import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    RESAMPLES,
    mean_rate,
    paired_difference,
    paired_ratio,
    ratio_of_ratios,
    ratio_of_sums,
    ratios_of_sums,
    verdict,
    weights,
)


def test_weights_are_draw_counts_reproducible_and_depend_on_n_and_seed():
    w = weights(5)
    assert w.shape == (RESAMPLES, 5)
    assert (w.sum(axis=1) == 5).all() and (w >= 0).all() and (w == w.round()).all()
    assert np.array_equal(w, weights(5))  # seeded: the same draws every call
    assert not np.array_equal(w, weights(5, seed=1))
    assert abs(w.mean() - 1.0) < 0.02  # each prompt drawn once per resample on average
    small = weights(3, resamples=7, seed=3)
    assert np.array_equal(small, weights(3, resamples=7, seed=3)) and small.shape == (7, 3)


def test_identical_prompts_give_a_zero_width_interval():
    e = ratio_of_sums([2, 2, 2], [4, 4, 4])  # acceptance 2 / 4 on each prompt
    assert (e.value, e.lo, e.hi, e.n) == (0.5, 0.5, 0.5, 3)
    m = mean_rate([7.0, 7.0])
    assert (m.value, m.lo, m.hi, m.n) == (7.0, 7.0, 7.0, 2)


def test_two_prompts_span_their_three_outcomes():
    e = mean_rate([0.0, 1.0])  # resampled means: 0, 0.5 or 1
    assert (e.value, e.lo, e.hi) == (0.5, 0.0, 1.0)
    r = ratio_of_sums([1, 3], [4, 4])  # sum/sum: 2/8, 4/8 or 6/8
    assert (r.value, r.lo, r.hi) == (0.5, 0.25, 0.75)


def test_ratio_of_sums_weights_long_prompts_more_than_a_mean_of_rates():
    e = ratio_of_sums([1, 9], [2, 10])  # (1 + 9) / (2 + 10), not (0.5 + 0.9) / 2
    assert e.value == pytest.approx(10 / 12)
    assert (e.lo, e.hi) == pytest.approx((0.5, 0.9))  # both draws of prompt 0: 2/4; of prompt 1: 18/20


def test_one_prompt_has_no_interval():
    for e in (ratio_of_sums([3], [4]), mean_rate([5.0]), paired_ratio([2.0], [1.0])):
        assert e.n == 1 and not math.isnan(e.value)
        assert math.isnan(e.lo) and math.isnan(e.hi)
    assert math.isnan(ratio_of_sums([], []).value) and ratio_of_sums([], []).n == 0


def test_a_degenerate_resample_is_left_out():
    # prompt 0 drafted nothing: a resample of prompt 0 three times (1 in 27) has no acceptance and is left out;
    # 7 in 27 draw prompts 0 and 1 only (1/4), 7 in 27 prompts 0 and 2 only (3/4); the others lie between
    e = ratio_of_sums([0, 1, 3], [0, 4, 4])
    assert (e.value, e.lo, e.hi, e.n) == (0.5, 0.25, 0.75, 2)  # n: the prompts that drafted
    only = ratio_of_sums([0, 1], [0, 4])  # one prompt drafted: no interval
    assert only.value == 0.25 and math.isnan(only.lo) and only.n == 1
    nothing = ratio_of_sums([0, 0], [0, 0])
    assert math.isnan(nothing.value) and math.isnan(nothing.lo) and math.isnan(nothing.hi)


def test_mean_rate_leaves_out_prompts_without_a_rate():
    e = mean_rate([2.0, float("nan"), 4.0])
    assert (e.value, e.lo, e.hi, e.n) == (3.0, 2.0, 4.0, 2)


def test_paired_ratio_pairs_prompt_by_prompt():
    # every prompt twice as fast as plain's on it: every resample gives 2, however uneven the prompts are
    e = paired_ratio([2.0, 40.0, 6.0], [1.0, 20.0, 3.0])
    assert (e.value, e.lo, e.hi, e.n) == (2.0, 2.0, 2.0, 3)
    # a prompt without plain is left out of the pairing
    e = paired_ratio([2.0, 40.0, 6.0], [1.0, float("nan"), 3.0])
    assert (e.value, e.n) == (2.0, 2)
    # unpaired variation: 10 / 5 over prompts (1 + 9) / (1 + 4): resamples 2/2 = 1, 10/5 = 2, 18/8 = 2.25
    e = paired_ratio([1.0, 9.0], [1.0, 4.0])
    assert (e.value, e.lo, e.hi) == (2.0, 1.0, 2.25)


def test_ratio_of_ratios_by_hand():
    # pooled speedup: (10 tokens / 1 s) over plain's (10 / 2 s) on both prompts: 2 on every resample
    e = ratio_of_ratios([10, 10], [1, 1], [10, 10], [2, 2])
    assert (e.value, e.lo, e.hi, e.n) == (2.0, 2.0, 2.0, 2)


def test_many_ratios_share_one_set_of_draws():
    num, den = np.array([[1.0, 0.0], [3.0, 1.0]]), np.array([[4.0, 1.0], [4.0, 1.0]])
    a, b = ratios_of_sums(num, den)
    assert a == ratio_of_sums([1, 3], [4, 4]) and b == ratio_of_sums([0, 1], [1, 1])


def test_paired_difference_by_hand():
    same = paired_difference([1, 3], [4, 4], [1, 3], [4, 4])
    assert (same.value, same.lo, same.hi) == (0.0, 0.0, 0.0)  # A against itself: zero on every resample
    # A accepts 1/2 on both prompts; B 0/2 and 1/2: differences 0.5 (prompt 0 twice), 0.25, 0 (prompt 1 twice)
    d = paired_difference([1, 1], [2, 2], [0, 1], [2, 2])
    assert (d.value, d.lo, d.hi, d.n) == (0.25, 0.0, 0.5, 2)
    # a prompt missing for one side (NaN) is left out of both
    d = paired_difference([1, 1, 1], [2, 2, 2], [0, 1, float("nan")], [2, 2, 2])
    assert d.n == 2 and d.value == 0.25


def _bca_by_hand(loop: list[float], value: float, jack: list[float]) -> tuple[float, float]:
    """Efron's BCa interval of one figure, written out scalar by scalar."""
    nd = NormalDist()
    below = (sum(x < value for x in loop) + 0.5 * sum(x == value for x in loop)) / len(loop)
    z0 = nd.inv_cdf(below)
    mean = sum(jack) / len(jack)
    a = sum((mean - j) ** 3 for j in jack) / (6 * sum((mean - j) ** 2 for j in jack) ** 1.5)
    levels = [nd.cdf(z0 + (z0 + z) / (1 - a * (z0 + z))) for z in (nd.inv_cdf(0.025), nd.inv_cdf(0.975))]
    return tuple(np.percentile(loop, [100 * q for q in levels]))


def test_the_vectorised_bootstrap_equals_a_loop_over_the_same_draws():
    """The BCa interval (the rule since the statistics review): the percentile levels moved by the bias and the
    acceleration, here about 0.4 and 0.2 prompts' worth; the same draws read one by one give the same bounds."""
    rng = np.random.default_rng(0)
    num, den = rng.integers(0, 10, 13).astype(float), rng.integers(1, 10, 13).astype(float)
    w = weights(13)
    loop = [sum(w[r] * num) / sum(w[r] * den) for r in range(RESAMPLES)]
    jack = [(num.sum() - num[i]) / (den.sum() - den[i]) for i in range(13)]
    e = ratio_of_sums(num, den)
    assert (e.lo, e.hi) == pytest.approx(_bca_by_hand(loop, num.sum() / den.sum(), jack))
    assert (e.lo, e.hi) != pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])))  # not the percentile interval


def test_a_symmetric_ratio_keeps_the_percentile_interval():
    """Two prompts: no bias (half the resamples below the estimate, ties half) and no skew (the two leave-one-out
    values mirror each other): BCa's levels are the percentile's 2.5% and 97.5%."""
    e = ratio_of_sums([1, 3], [4, 4])
    assert (e.lo, e.hi) == (0.25, 0.75)


def test_the_interval_of_a_mean_is_about_two_standard_errors_wide():
    x = np.random.default_rng(1).normal(10.0, 2.0, 200)
    e = mean_rate(x)
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert e.lo < x.mean() < e.hi
    assert (e.hi - e.lo) / (2 * 1.96 * se) == pytest.approx(1.0, abs=0.15)


@pytest.mark.parametrize(
    "lo,hi,threshold,side,want",
    [
        (1.1, 1.4, 1.0, ">", HOLDS),  # wholly above
        (0.7, 0.9, 1.0, ">", FAILS),  # wholly below
        (0.9, 1.2, 1.0, ">", INCONCLUSIVE),  # straddles
        (0.9, 1.0, 1.0, ">", FAILS),  # nothing in it is above 1
        (1.0, 1.2, 1.0, ">", INCONCLUSIVE),  # 1.0 itself is not above 1
        (0.0, 0.2, 0.0, ">=", HOLDS),
        (-0.2, -0.1, 0.0, ">=", FAILS),
        (-0.1, 0.1, 0.0, ">=", INCONCLUSIVE),
        (0.1, 0.2, 0.25, "<", HOLDS),
        (0.3, 0.4, 0.25, "<", FAILS),
        (0.2, 0.3, 0.25, "<", INCONCLUSIVE),
        (0.2, 0.25, 0.25, "<=", HOLDS),
        (float("nan"), 2.0, 1.0, ">", INCONCLUSIVE),  # no interval: never a verdict either way
    ],
)
def test_verdict(lo, hi, threshold, side, want):
    assert verdict(lo, hi, threshold, side) == want


def test_verdict_refuses_an_unknown_side():
    with pytest.raises(ValueError, match="side '!='"):
        verdict(0.0, 1.0, 0.5, "!=")
