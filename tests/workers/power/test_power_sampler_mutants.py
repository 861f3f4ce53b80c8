"""The sampler's remaining contracts, each a case a plausible slip would break (written against mutants of
workers/power/sampler.py): windows with samples on both sides, errors word for word, the pending bound, the
thread's schedule, sample order across sources, the idle baseline around a running sampler, zero-length windows.

Timing here only ever has a bound that a loaded machine cannot break: a busy sampler takes fewer samples, never more.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.workers.power.power_trace import TraceSource, replayed, trace
from workers.errors import PowerError
from workers.power import PowerSampler, PowerSource, Reading, counter_delta, integrate
from workers.power.sampler import Span


class Counting(PowerSource):
    """A meter at constant watts that counts its reads and may take `read_s` seconds per read."""

    name, measured = "rapl", True

    def __init__(self, watts: float = 20.0, read_s: float = 0.0):
        self.watts, self.read_s, self.reads = watts, read_s, 0

    @classmethod
    def open(cls) -> Counting:
        raise PowerError("built by the test")

    def read(self) -> Reading:
        self.reads += 1
        if self.read_s:
            time.sleep(self.read_s)
        return Reading(t_s=time.time(), power_w=self.watts)


def test_samples_outside_the_window_do_not_enter_its_integral():
    # zigzag 0/10 W: over [2.5, 3.5] 5 -> 10 -> 5 W, 7.5 J; the samples at 0, 1, 2 and 4 lie outside
    assert integrate([0, 1, 2, 3, 4], [0, 10, 0, 10, 0], 2.5, 3.5) == pytest.approx(7.5)


def test_errors_are_word_for_word():
    with pytest.raises(PowerError, match=r"^PowerSampler needs at least one power source \(see `greenspec power`\)$"):
        PowerSampler([])
    sampler = PowerSampler([Counting()])
    sampler.close()
    with pytest.raises(PowerError, match=r"^this PowerSampler is closed; build a new one with fresh sources$"):
        sampler.start()


def test_a_rate_below_one_hertz_is_allowed():
    assert PowerSampler([Counting()], hz=0.5).hz == 0.5


def test_pending_samples_are_bounded_oldest_dropped(monkeypatch):
    monkeypatch.setattr("workers.power.sampler.MAX_PENDING", 3)
    src = TraceSource([0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0, 5.0])
    sampler = replayed(src)
    assert [s.t_s for s in sampler.drain_samples()] == [2.0, 3.0, 4.0]
    assert len(sampler.samples("trace")) == 5  # the windows' own store keeps them all


def test_the_thread_is_a_named_daemon_and_stops():
    sampler = PowerSampler([Counting()], hz=50.0).start()
    try:
        [thread] = [t for t in threading.enumerate() if t.name == "greenspec-power-sampler"]
        assert thread.daemon and sampler.running
    finally:
        sampler.stop()
    assert sampler.running is False
    assert not [t for t in threading.enumerate() if t.name == "greenspec-power-sampler"]
    sampler.close()


def test_the_thread_samples_on_its_grid_never_faster():
    src = Counting()
    with PowerSampler([src], hz=10.0):
        time.sleep(0.5)
    # one at start, ~5 on the 10 Hz grid, one at stop; a load can only make it fewer, a sampler that spins more
    assert 2 <= src.reads <= 9


def test_a_sampler_slower_than_its_period_keeps_going():
    src = Counting(read_s=0.15)  # each read outlasts the 0.1 s period: the grid restarts after every one
    with PowerSampler([src], hz=10.0):
        time.sleep(1.0)
    assert src.reads >= 4  # ~1 s / 0.15 s, plus start and stop; a thread that died after falling behind gives 2-3


def test_all_samples_come_in_time_order_across_sources():
    a = TraceSource([0.0, 2.0], [1.0, 1.0], name="a")
    b = TraceSource([1.0, 3.0], [2.0, 2.0], name="b")
    sampler = replayed(a, b)  # read a, b, a, b: stored per source as a 0, 2 and b 1, 3
    assert [(s.source, s.t_s) for s in sampler.samples()] == [("a", 0.0), ("b", 1.0), ("a", 2.0), ("b", 3.0)]


def test_the_idle_baseline_leaves_a_running_sampler_running_and_a_stopped_one_stopped():
    src = Counting()
    with PowerSampler([src], hz=50.0) as sampler:
        base = sampler.idle_baseline(0.05)
        assert sampler.running
    assert base["mean_power_w"] == pytest.approx(20.0)
    stopped = PowerSampler([Counting()], hz=50.0)
    base = stopped.idle_baseline(0.3)
    assert not stopped.running and base["n_samples"] >= 3  # sampled by its thread, not only at the window's edge
    assert set(base) == {
        "seconds",
        "t0_s",
        "t1_s",
        "energy_j",
        "mean_power_w",
        "sources",
        "measured",
        "n_samples",
        "by_source_w",
    }
    stopped.close()


def test_a_zero_length_idle_baseline_has_watts_but_no_per_source_rates():
    sampler = replayed(trace())  # its clock stands at 6 s, where the trace reads 30 W; the trace is spent
    base = sampler.idle_baseline(0.0)
    assert base["seconds"] == 0.0 and base["mean_power_w"] == 30.0 and base["by_source_w"] == {}


def test_a_zero_length_window_sums_the_sources_watts():
    a = TraceSource([0.0, 2.0], [10.0, 30.0], name="a")
    b = TraceSource([0.0, 2.0], [5.0, 5.0], name="b")
    assert replayed(a, b).window(1.0, 1.0).mean_power_w == pytest.approx(20.0 + 5.0)


def test_a_span_has_no_window_until_its_block_ends():
    assert Span(1.0).window is None


class Broken(PowerSource):
    """A meter whose every read fails."""

    name, measured = "nvml", True

    @classmethod
    def open(cls) -> Broken:
        raise PowerError("built by the test")

    def read(self) -> Reading:
        raise PowerError("NVML read failed: GPU is lost")


def test_a_failing_source_is_logged_once_and_the_others_still_sampled(caplog):
    good = TraceSource([0.0, 1.0, 2.0], [5.0, 5.0, 5.0])
    sampler = PowerSampler([Broken(), good], clock=lambda: 2.0)
    with caplog.at_level("WARNING", logger="workers.power.sampler"):
        for _ in range(3):
            sampler.sample_now()
    assert [r.getMessage() for r in caplog.records] == [
        "power source nvml failed to read: NVML read failed: GPU is lost"
    ]
    assert [s.t_s for s in sampler.samples("trace")] == [0.0, 1.0, 2.0] and sampler.samples("nvml") == []
    assert sampler.window(0.0, 2.0).energy_j == pytest.approx(10.0)


def test_mixing_measured_and_estimated_sources_warns_once_naming_the_measured(caplog):
    estimate = TraceSource([0.0], [9.0], name="estimate", measured=False)
    with caplog.at_level("WARNING", logger="workers.power.sampler"):
        PowerSampler([TraceSource([0.0], [1.0], name="rapl"), TraceSource([0.0], [1.0], name="nvml"), estimate])
        PowerSampler([TraceSource([0.0], [1.0], name="rapl"), TraceSource([0.0], [1.0], name="nvml")])
        PowerSampler([TraceSource([0.0], [9.0], name="estimate", measured=False)])
    assert [r.getMessage() for r in caplog.records] == [
        "measured and estimated sources sampled together; windows count the measured ones only (rapl, nvml)"
    ]


def test_retained_samples_keep_one_before_the_cut():
    # clock at 3.5 s, 2 s retained: samples before 1.5 s go, but the one at 1 s stays for edge interpolation
    sampler = PowerSampler([TraceSource([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0])], retain_s=2.0, clock=lambda: 3.5)
    for _ in range(4):
        sampler.sample_now()
    assert [s.t_s for s in sampler.samples("trace")] == [1.0, 2.0, 3.0]
    assert [s.t_s for s in sampler.drain_samples()] == [0.0, 1.0, 2.0, 3.0]  # storage still gets every one


def test_a_window_over_a_source_not_sampled_names_what_is():
    with pytest.raises(PowerError, match=r"^power source\(s\) \['nope'\] not sampled here; sampled: \['nvml'\]$"):
        replayed(trace()).window(0.0, 1.0, only=["nope"])
    a, b = TraceSource([0.0, 1.0], [1.0, 1.0], name="a"), TraceSource([0.5], [2.0], name="b")
    assert [s.t_s for s in replayed(a, b).samples("a")] == [0.0, 1.0]


def test_counter_delta_errors_and_a_zero_length_window():
    with pytest.raises(ValueError, match=r"^counter_delta needs >= 2 matching samples, got 3 times and 2 counts$"):
        counter_delta([0.0, 1.0, 2.0], [0.0, 1.0], 0.0, 1.0)
    with pytest.raises(ValueError, match=r"^window ends before it starts: t0=2.0 t1=1.0$"):
        counter_delta([0.0, 1.0], [0.0, 1.0], 2.0, 1.0)
    assert counter_delta([0.0, 1.0], [0.0, 5.0], 0.5, 0.5) == 0.0


def test_counter_delta_inside_a_middle_interval_and_before_the_first_sample():
    t, e = [1.0, 2.0, 3.0, 4.0], [0.0, 10.0, 30.0, 60.0]  # 10, 20, 30 W
    assert counter_delta(t, e, 2.2, 2.5) == pytest.approx(6.0)  # 20 W x 0.3 s, between the middle samples
    assert counter_delta(t, e, 0.5, 1.0) == pytest.approx(5.0)  # before the first: at its first rate, 10 W x 0.5 s


def test_counter_with_a_repeated_first_timestamp_has_no_rate_there():
    # two samples at 1 s: no interval to take a rate from, so before them the counter is held
    assert counter_delta([1.0, 1.0, 2.0], [0.0, 0.0, 10.0], 0.0, 2.0) == pytest.approx(10.0)


def test_a_window_with_no_sample_at_all_says_so():
    sampler = PowerSampler([Broken()])
    with pytest.raises(PowerError, match=r"^no power samples from \['nvml'\] to measure the window 0.000-1.000$"):
        sampler.window(0.0, 1.0)
