"""The labelled estimate: CPU power modelled from utilisation, for machines with no meter.

power_w = idle_w + (tdp_w - idle_w) * utilisation, where utilisation is the busy fraction of all cores
(psutil's system-wide CPU times, so 1 of 8 cores busy counts 1/8 of the TDP) since the previous read.
`GREENSPEC_CPU_TDP_W` and `GREENSPEC_CPU_IDLE_W` (default 10 W) set the model; without the first, the TDP
comes from the CPU's model name where `TDP_TABLE` knows it (times the packages found), else 65 W (a desktop
package). The source's `detail` says which. It is always `measured=False` and named "estimate"; the sampler never adds it to measured
joules. In a container /proc/stat shows the host's CPUs, so the figure covers the whole host.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from workers.errors import PowerError
from workers.power.base import PowerSource, Reading

logger = logging.getLogger(__name__)

DEFAULT_TDP_W = 65.0
DEFAULT_IDLE_W = 10.0
CPUINFO = Path("/proc/cpuinfo")

# Vendor TDPs (W per package) of common CPUs, matched as whole words in the model name (a small subset of the kind
# of table CodeCarbon keeps); a cloud part without a public TDP (e.g. "AMD EPYC" alone) falls back to 65 W.
TDP_TABLE: dict[str, float] = {
    "i5-12400": 65.0,
    "i7-8700K": 95.0,
    "i9-9900K": 95.0,
    "i7-12700K": 125.0,
    "i9-13900K": 125.0,
    "Ryzen 7 5800X": 105.0,
    "Ryzen 9 5950X": 105.0,
    "Ryzen 9 7950X": 170.0,
    "EPYC 7742": 225.0,
    "EPYC 7763": 280.0,
    "EPYC 9654": 360.0,
    "Xeon(R) Gold 6248": 150.0,
    "Xeon(R) Platinum 8380": 270.0,
    "Xeon(R) CPU E5-2686 v4": 145.0,
}


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


def table_tdp_w(model_name: str) -> tuple[str, float] | None:
    """The (table key, watts per package) whose key appears as whole words in `model_name`, else None.

    >>> table_tdp_w("Intel(R) Core(TM) i7-12700K CPU @ 3.60GHz"), table_tdp_w("AMD EPYC")
    (('i7-12700K', 125.0), None)
    """
    for key, tdp_w in TDP_TABLE.items():
        if re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", model_name):
            return key, tdp_w
    return None


def cpu_model(cpuinfo: str) -> tuple[str, int]:
    """The first "model name" in /proc/cpuinfo's text and how many packages ("physical id"s) it lists (>= 1)."""
    names = re.findall(r"^model name\s*:\s*(.+?)\s*$", cpuinfo, flags=re.M)
    packages = set(re.findall(r"^physical id\s*:\s*(\d+)", cpuinfo, flags=re.M))
    return (names[0] if names else ""), max(1, len(packages))


def default_tdp_w(cpuinfo: str) -> tuple[float, str]:
    """The TDP for this CPU from the table (times its packages), else DEFAULT_TDP_W; and where it came from."""
    name, packages = cpu_model(cpuinfo)
    found = table_tdp_w(name)
    if found is None:
        return DEFAULT_TDP_W, f"default TDP (CPU {name or 'unknown'!r} not in the table)"
    key, tdp_w = found
    return tdp_w * packages, f"table TDP of {key} ({tdp_w:g} W x {packages} package{'s' if packages > 1 else ''})"


def _read_cpuinfo() -> str:
    """/proc/cpuinfo's text, empty where it is absent (macOS, Windows)."""
    try:
        return CPUINFO.read_text(errors="replace")
    except OSError:
        return ""


def model_power_w(utilisation: float, tdp_w: float, idle_w: float) -> float:
    """The estimate's power model: the idle floor plus the busy share of the TDP above it."""
    return idle_w + (tdp_w - idle_w) * min(max(utilisation, 0.0), 1.0)


class EstimateSource(PowerSource):
    """Watts estimated from system-wide CPU utilisation and a TDP; never a measurement."""

    name = "estimate"
    measured = False

    def __init__(
        self,
        tdp_w: float = DEFAULT_TDP_W,
        idle_w: float = DEFAULT_IDLE_W,
        tdp_from: str = "",
        cpu_times: Callable[[], Any] = psutil.cpu_times,
        clock: Callable[[], float] = time.time,
    ):
        if idle_w > tdp_w:
            raise PowerError(
                f"estimate idle floor {idle_w} W exceeds the TDP {tdp_w} W "
                f"(set GREENSPEC_CPU_IDLE_W below GREENSPEC_CPU_TDP_W)"
            )
        self.tdp_w = tdp_w
        self.idle_w = idle_w
        self.n_cores = psutil.cpu_count() or 1
        self._cpu_times, self._clock = cpu_times, clock  # psutil's system-wide times, epoch seconds
        self.detail = f"estimated: {idle_w:g} W idle + CPU utilisation x {tdp_w:g} W TDP over {self.n_cores} cores"
        if tdp_from:
            self.detail += f"; {tdp_from}"
        self._last_idle, self._last_total = 0.0, 0.0  # first read: utilisation since boot
        self._utilisation = 0.0

    @classmethod
    def open(cls) -> EstimateSource:
        """The estimate with TDP and idle floor from GREENSPEC_CPU_TDP_W / GREENSPEC_CPU_IDLE_W, else the CPU's table TDP."""
        tdp_w, tdp_from = default_tdp_w(_read_cpuinfo())
        if os.environ.get("GREENSPEC_CPU_TDP_W", "").strip():
            tdp_w, tdp_from = _env_watts("GREENSPEC_CPU_TDP_W", tdp_w), "TDP from GREENSPEC_CPU_TDP_W"
        return cls(tdp_w, _env_watts("GREENSPEC_CPU_IDLE_W", DEFAULT_IDLE_W), tdp_from)

    def utilisation(self) -> float:
        """Busy fraction of all cores since the previous call (the previous value if no time has passed)."""
        times = self._cpu_times()
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
        t_s = self._clock()
        return Reading(t_s=t_s, power_w=model_power_w(self.utilisation(), self.tdp_w, self.idle_w))
