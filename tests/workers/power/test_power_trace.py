"""The sampler's window energy on replayed traces (steps, ramps, gaps, a wrapping counter), worked out by hand."""

from __future__ import annotations

import pytest

from tests.workers.power.power_trace import TraceSource, replayed

# Samples 1 s apart; watts change between samples, so every window edge below lies on a slope.
STEPS_T = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
STEPS_W = [0.0, 20.0, 20.0, 60.0, 60.0, 30.0, 30.0]


def test_steps_window_between_samples_interpolates_both_edges():
    win = replayed(TraceSource(STEPS_T, STEPS_W)).window(0.5, 4.5)
    # [0.5, 1]: 10 -> 20 W, 7.5 J; [1, 2]: 20 J; [2, 3]: 20 -> 60 W, 40 J; [3, 4]: 60 J; [4, 4.5]: 60 -> 45 W, 26.25 J
    # (a window that lost the sample before 0.5 would hold 20 W there: 10 J; the one after 4.5, 60 W: 30 J)
    assert win.energy_j == pytest.approx(153.75)
    assert win.mean_power_w == pytest.approx(153.75 / 4.0)
    assert win.n_samples == 4 and win.sources == ("trace",) and win.measured is True
    assert win.by_source_j == pytest.approx({"trace": 153.75})


def test_window_inside_one_interval_and_on_sample_instants():
    sampler = replayed(TraceSource(STEPS_T, STEPS_W))
    assert sampler.window(2.25, 2.75).energy_j == pytest.approx(0.5 * 40.0)  # 30 -> 50 W, mean 40 W
    assert sampler.window(1.0, 3.0).energy_j == pytest.approx(20.0 + 40.0)
    assert sampler.window(1.0, 3.0).n_samples == 3
    assert sampler.window(2.5, 2.5).energy_j == 0.0 and sampler.window(2.5, 2.5).mean_power_w == pytest.approx(40.0)


def test_ramp_window_is_exact():
    t = [0.0, 1.0, 2.0, 3.0, 4.0]
    win = replayed(TraceSource(t, [5.0 + 10.0 * x for x in t])).window(0.3, 3.6)
    # the integral of 5 + 10 t over [0.3, 3.6]: 5 * 3.3 + 5 * (3.6^2 - 0.3^2)
    assert win.energy_j == pytest.approx(16.5 + 64.35)


def test_gap_in_the_trace_is_bridged_linearly():
    win = replayed(TraceSource([0.0, 1.0, 6.0, 7.0], [10.0, 10.0, 35.0, 35.0])).window(0.5, 6.5)
    assert win.energy_j == pytest.approx(5.0 + (10.0 + 35.0) / 2 * 5.0 + 17.5)
    assert win.n_samples == 2


def test_wrapping_counter_gives_the_joules_between_window_edges():
    # totals 0, 12, 24, 60, 96, 108 J (12, 12, 36, 36, 12 W) on a raw counter starting at 90 of a 100 J range
    totals = [0.0, 12.0, 24.0, 60.0, 96.0, 108.0]
    raw = [(90.0 + e) % 100.0 for e in totals]
    assert raw[:2] == [90.0, 2.0]  # it wraps inside the window
    src = TraceSource([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], raw_energy_j=raw, counter_range_j=100.0, name="rapl")
    win = replayed(src).window(0.5, 3.25)
    assert win.energy_j == pytest.approx((60.0 + 0.25 * 36.0) - 6.0)  # counter at 3.25 minus counter at 0.5
    assert win.mean_power_w == pytest.approx(63.0 / 2.75) and win.source_label == "rapl"


def test_counter_beyond_its_last_sample_runs_on_at_the_last_rate():
    src = TraceSource([0.0, 1.0, 2.0], raw_energy_j=[0.0, 10.0, 40.0])
    assert replayed(src).window(1.5, 2.5).energy_j == pytest.approx(30.0)  # 30 W on both sides of the last sample


def test_two_measured_sources_add_and_the_estimate_stays_out():
    sampler = replayed(
        TraceSource(STEPS_T, STEPS_W, name="nvml"),
        TraceSource(STEPS_T, [5.0] * 7, name="rapl"),
        TraceSource(STEPS_T, [1000.0] * 7, name="estimate", measured=False),
    )
    win = sampler.window(0.5, 4.5)
    assert win.by_source_j == pytest.approx({"nvml": 153.75, "rapl": 20.0})
    assert win.energy_j == pytest.approx(173.75) and win.source_label == "nvml+rapl" and win.n_samples == 8
    assert sampler.window(0.5, 4.5, only=["estimate"]).energy_j == pytest.approx(4000.0)


def test_measure_takes_its_span_from_the_sampler_clock():
    now = iter([0.5, 4.5])
    sampler = replayed(TraceSource(STEPS_T, STEPS_W))
    sampler.clock = lambda: next(now)
    with sampler.measure() as span:
        pass
    assert (span.window.t0_s, span.window.t1_s) == (0.5, 4.5) and span.window.energy_j == pytest.approx(153.75)
