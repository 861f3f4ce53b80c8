"""The power-source seam: one ABC, the records that cross it, and the counter arithmetic sources share.

A `PowerSource` is one kind of meter (NVML, RAPL, powermetrics, or the labelled estimate). Each `read()`
returns a `Reading` stamped with `time.time()` (epoch seconds) carrying an instantaneous `power_w`,
a cumulative `energy_j` counter (monotonic since the source was opened, wraparound already undone),
or both. The sampler turns readings into `PowerSample`s and windows of them into `EnergyWindow`s.

Example:
    >>> from workers.power import find_sources
    >>> [src] = find_sources(["estimate"])
    >>> src.read()
    Reading(t_s=1732950000.12, power_w=23.4, energy_j=None)
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import NamedTuple

# The names printed by `greenspec power` and stored with every generation (a public contract).
SOURCE_NAMES = ("nvml", "rapl", "powermetrics", "estimate")


@dataclass(frozen=True)
class Reading:
    """One read of a source: when, how many watts now, how many joules so far (either may be None)."""

    t_s: float
    power_w: float | None = None
    energy_j: float | None = None


@dataclass(frozen=True)
class PowerSample:
    """A timestamped reading tagged with its source name: the raw row stored for the power trace."""

    t_s: float
    source: str
    power_w: float | None
    energy_j: float | None
    measured: bool


@dataclass(frozen=True)
class EnergyWindow:
    """Energy over [t0_s, t1_s]; `measured` is False only when every counted source is the estimate.

    `sources` names the sources whose joules were summed into `energy_j` (measured ones only, when any
    measured source was sampled); `by_source_j` breaks the total down; `n_samples` counts the samples of
    those sources inside the window.
    """

    t0_s: float
    t1_s: float
    energy_j: float
    mean_power_w: float
    sources: tuple[str, ...]
    measured: bool
    n_samples: int
    by_source_j: dict[str, float] = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        """The window's length in seconds."""
        return self.t1_s - self.t0_s

    @property
    def source_label(self) -> str:
        """The summed sources as one stored string, e.g. "nvml+rapl" or "estimate"."""
        return "+".join(self.sources)


@dataclass(frozen=True)
class SourceSummary:
    """One row of `greenspec power`: a source, its mean watts over the survey, measured or estimated."""

    name: str
    measured: bool
    mean_power_w: float
    energy_j: float
    seconds: float
    n_samples: int
    detail: str


class Probe(NamedTuple):
    """One row of `greenspec doctor`: whether a source can be opened here and why not."""

    name: str
    available: bool
    measured: bool
    detail: str


class PowerSource(abc.ABC):
    """A power meter. Subclasses set `name` and `measured` and implement `open`, `read` and `close`."""

    name: str = ""
    measured: bool = True
    detail: str = ""  # what was found, e.g. "2 GPUs (energy counter)"; shown by survey and doctor

    @classmethod
    @abc.abstractmethod
    def open(cls) -> PowerSource:
        """Open the source on this machine; raise `PowerError` (one line) if it is absent."""

    @abc.abstractmethod
    def read(self) -> Reading:
        """Read the meter now."""

    def close(self) -> None:
        """Release handles or processes (default: nothing to release)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, measured={self.measured}, detail={self.detail!r})"


class WrappingCounter:
    """Turns a raw counter that wraps at `range_` (or resets) into a monotonic total since the first value.

    A raw value below the previous one means the counter wrapped once (add `range_`) when a range is known,
    or was reset (driver reload) when it is not; the caller must read at least once per wrap period.
    """

    def __init__(self, range_: float | None = None):
        self.range_ = range_
        self._last: float | None = None
        self.total = 0.0

    def update(self, raw: float) -> float:
        """Feed a raw counter value; return the total advance since the first value (same units)."""
        if self._last is not None:
            delta = raw - self._last
            if delta < 0:
                delta = delta + self.range_ if self.range_ else 0.0
            self.total += delta
        self._last = raw
        return self.total


class PowerFromCounter:
    """Derives instantaneous watts from successive cumulative joules (for counter-only sources)."""

    def __init__(self):
        self._last: tuple[float, float] | None = None  # (t_s, energy_j)

    def update(self, t_s: float, energy_j: float) -> float | None:
        """Mean watts since the previous update, None on the first."""
        last, self._last = self._last, (t_s, energy_j)
        if last is None or t_s <= last[0]:
            return None
        return (energy_j - last[1]) / (t_s - last[0])
