"""The energy math against analytic traces: constant, ramp, step, edges interpolated, counters, J/token figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workers.power import PowerSample, counter_delta, integrate, j_per_100_tokens, mean_power_w, tokens_per_j
from workers.power.sampler import source_energy


def test_constant_power_is_watts_times_seconds():
    assert integrate([0.0, 1.0, 2.0, 3.0], [5.0] * 4, 0.5, 2.7) == pytest.approx(5.0 * 2.2)


def test_ramp_is_exact_with_edges_between_samples():
    t = np.arange(0.0, 11.0)  # w = 2t, so the energy over [a, b] is b^2 - a^2
    assert integrate(t, 2 * t, 2.5, 7.25) == pytest.approx(7.25**2 - 2.5**2)


def test_ramp_on_irregular_sampling():
    t = np.array([0.0, 0.13, 0.9, 1.05, 2.4, 3.0, 4.71, 5.0])
    assert integrate(t, 4 * t + 1, 0.5, 4.9) == pytest.approx((2 * 4.9**2 + 4.9) - (2 * 0.5**2 + 0.5))


def test_step_inside_window_is_a_trapezoid_across_the_step():
    t = np.arange(0.0, 11.0)
    w = np.where(t < 5, 10.0, 30.0)
    # 10 W for [2, 4], the sampled ramp 10 -> 30 W over [4, 5], 30 W for [5, 8]
    assert integrate(t, w, 2.0, 8.0) == pytest.approx(20.0 + 20.0 + 90.0)


def test_window_inside_one_sampling_interval_interpolates_both_edges():
    assert integrate([0.0, 1.0], [0.0, 100.0], 0.25, 0.75) == pytest.approx(50 * (0.75**2 - 0.25**2))


def test_power_is_held_beyond_the_sampled_span():
    assert integrate([1.0, 2.0], [10.0, 20.0], 0.0, 3.0) == pytest.approx(10.0 + 15.0 + 20.0)


def test_zero_length_window_is_zero_and_bad_windows_raise():
    assert integrate([0.0, 1.0], [3.0, 3.0], 0.5, 0.5) == 0.0
    with pytest.raises(ValueError, match="ends before it starts"):
        integrate([0.0, 1.0], [3.0, 3.0], 0.8, 0.2)
    with pytest.raises(ValueError, match="non-empty"):
        integrate([], [], 0.0, 1.0)


def test_counter_delta_interpolates_and_extends_at_the_edge_rate():
    t = [10.0, 10.3, 11.1, 12.0]
    e = [3.0 * x for x in t]  # a 3 W counter
    assert counter_delta(t, e, 10.1, 11.9) == pytest.approx(3.0 * 1.8)
    assert counter_delta(t, e, 9.0, 13.0) == pytest.approx(3.0 * 4.0)  # both edges extrapolated


def test_source_energy_prefers_the_counter_over_the_power_trace():
    # power readings say 1000 W, the counter says 7 W: the counter wins
    samples = [PowerSample(t_s=t, source="nvml", power_w=1000.0, energy_j=7.0 * t, measured=True) for t in (0, 1, 2)]
    assert source_energy(samples, 0.5, 1.5) == pytest.approx(7.0)
    no_counter = [PowerSample(t_s=t, source="nvml", power_w=50.0, energy_j=None, measured=True) for t in (0, 1, 2)]
    assert source_energy(no_counter, 0.5, 1.5) == pytest.approx(50.0)


def test_efficiency_figures_and_their_undefined_cases():
    assert j_per_100_tokens(50.0, 200) == pytest.approx(25.0)
    assert tokens_per_j(50.0, 200) == pytest.approx(4.0)
    assert mean_power_w(50.0, 2.0) == pytest.approx(25.0)
    assert j_per_100_tokens(50.0, 0) is None and tokens_per_j(0.0, 10) is None and mean_power_w(1.0, 0.0) is None
    assert j_per_100_tokens(None, 10) is None and tokens_per_j(None, 10) is None
    assert math.isclose(j_per_100_tokens(1.0, 3) * tokens_per_j(1.0, 3), 100.0)
