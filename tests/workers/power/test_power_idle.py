"""The idle floor measured before a run: a meter's mean watts at rest, unknown where only the estimate exists."""

from __future__ import annotations

import time

from workers.errors import PowerError
from workers.power import EstimateSource, PowerSource, Reading
from workers.power.idle import describe_idle_floor, measure_idle_floor_w


class Steady(PowerSource):
    """A meter reading a constant power, stamped with the wall clock (the sampler's clock)."""

    name, measured = "rapl", True

    def __init__(self, watts: float):
        self.watts, self.closed = watts, False

    @classmethod
    def open(cls) -> Steady:
        raise PowerError("built by the test")

    def read(self) -> Reading:
        return Reading(t_s=time.time(), power_w=self.watts)

    def close(self) -> None:
        self.closed = True


def test_a_meter_at_rest_gives_its_mean_watts_and_is_closed_after():
    meter, estimate = Steady(37.5), EstimateSource(65.0, 10.0)
    estimate.closed = False
    estimate.close = lambda: setattr(estimate, "closed", True)
    asked = []

    def opener(names):
        asked.append(names)
        return [meter, estimate]

    assert measure_idle_floor_w(["auto"], seconds=0.05, open_sources=opener) == 37.5  # the estimate left out
    assert asked == [("auto",)] and meter.closed and estimate.closed


def test_the_floor_is_unknown_without_a_meter_or_when_none_opens():
    estimate = EstimateSource(65.0, 10.0)
    assert measure_idle_floor_w(["estimate"], open_sources=lambda names: [estimate]) is None

    def absent(names):
        raise PowerError("NVML unavailable")

    assert measure_idle_floor_w(["nvml"], open_sources=absent) is None
    assert measure_idle_floor_w(["estimate"]) is None  # the real factory: the estimate only, nothing to wait for


def test_the_floor_as_one_line():
    assert describe_idle_floor(41.84) == "41.8 W (mean over 1 s at rest)"
    assert describe_idle_floor(None) == "unknown (no measured power source: the estimate has no floor to measure)"
