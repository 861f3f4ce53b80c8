"""The labelled estimate: CPU power modelled from utilisation, for machines with no meter.

power_w = idle_w + (tdp_w - idle_w) * utilisation, where utilisation is the busy fraction of all cores
(psutil's system-wide CPU times, so 1 of 8 cores busy counts 1/8 of the TDP) since the previous read.
`GREENSPEC_CPU_TDP_W` (default 65 W, a desktop package) and `GREENSPEC_CPU_IDLE_W` (default 10 W)
set the model. It is always `measured=False` and named "estimate"; the sampler never adds it to measured
joules. In a container /proc/stat shows the host's CPUs, so the figure covers the whole host.
"""

from __future__ import annotations

import logging
import os
import time

import psutil

from workers.errors import PowerError
from workers.power.base import PowerSource, Reading

logger = logging.getLogger(__name__)

DEFAULT_TDP_W = 65.0
DEFAULT_IDLE_W = 10.0


def _env_watts(key: str, default: float) -> float:
    """A positive wattage from the environment; PowerError naming the variable on junk."""
    raw = os.environ.get(key)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise PowerError(f"{key}={raw!r} is not a number of watts (e.g. {key}=65)") from None
    if value < 0:
        raise PowerError(f"{key}={raw!r} must be >= 0 watts")
    return value


def model_power_w(utilisation: float, tdp_w: float, idle_w: float) -> float:
    """The estimate's power model: the idle floor plus the busy share of the TDP above it."""
    return idle_w + (tdp_w - idle_w) * min(max(utilisation, 0.0), 1.0)


class EstimateSource(PowerSource):
    """Watts estimated from system-wide CPU utilisation and a TDP; never a measurement."""

    name = "estimate"
    measured = False

    def __init__(self, tdp_w: float = DEFAULT_TDP_W, idle_w: float = DEFAULT_IDLE_W):
        if idle_w > tdp_w:
            raise PowerError(f"estimate idle floor {idle_w} W exceeds the TDP {tdp_w} W "
                             f"(set GREENSPEC_CPU_IDLE_W below GREENSPEC_CPU_TDP_W)")
        self.tdp_w = tdp_w
        self.idle_w = idle_w
        self.n_cores = psutil.cpu_count() or 1
        self.detail = f"estimated: {idle_w:g} W idle + CPU utilisation x {tdp_w:g} W TDP over {self.n_cores} cores"
        self._last_idle, self._last_total = 0.0, 0.0  # first read: utilisation since boot
        self._utilisation = 0.0

    @classmethod
    def open(cls) -> EstimateSource:
        """The estimate with TDP and idle floor from GREENSPEC_CPU_TDP_W / GREENSPEC_CPU_IDLE_W."""
        return cls(_env_watts("GREENSPEC_CPU_TDP_W", DEFAULT_TDP_W), _env_watts("GREENSPEC_CPU_IDLE_W", DEFAULT_IDLE_W))

    def utilisation(self) -> float:
        """Busy fraction of all cores since the previous call (the previous value if no time has passed)."""
        times = psutil.cpu_times()
        idle = times.idle + getattr(times, "iowait", 0.0)
        total = sum(times)
        # guest time is already counted inside user on Linux; drop it so it is not counted twice
        total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
        d_total = total - self._last_total
        if d_total > 0:
            self._utilisation = 1.0 - (idle - self._last_idle) / d_total
        self._last_idle, self._last_total = idle, total
        return self._utilisation

    def read(self) -> Reading:
        """Modelled watts now (no energy counter: the sampler integrates the trace)."""
        t_s = time.time()
        return Reading(t_s=t_s, power_w=model_power_w(self.utilisation(), self.tdp_w, self.idle_w))
