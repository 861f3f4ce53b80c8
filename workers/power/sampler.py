"""A background sampler beside the work, and the energy of any time window from what it sampled.

Every `1/hz` seconds a daemon thread reads each source and keeps a timestamped `PowerSample`. A window
[t0, t1] (epoch seconds, e.g. one generation's start and end) gets its energy per source from the
cumulative counter where the source has one (linear interpolation of the counter at both edges), else from
the power trace integrated by the trapezoid rule with the power linearly interpolated at the edges.

Measured and estimated joules are never summed: a window counts the measured sources only when any
measured source was sampled (`measured=True`), and the estimate only when nothing else exists
(`measured=False`). Sources listed together by `find_sources("auto")` are either all measured or the
estimate alone; asking for both explicitly keeps the estimate's raw samples but leaves it out of windows.

Example:
    >>> with PowerSampler(find_sources(), hz=10.0) as sampler:
    ...     t0 = time.time(); result = generate(...); t1 = time.time()
    ...     win = sampler.window(t0, t1)
    >>> win.energy_j, win.mean_power_w, win.sources, win.measured
    (41.7, 212.3, ('nvml',), True)
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from workers.errors import PowerError
from workers.power.base import EnergyWindow, PowerSample, PowerSource

logger = logging.getLogger(__name__)

DEFAULT_HZ = 10.0
RETAIN_S = 3600.0  # windows look back at most this far; older samples leave memory (drained ones stay stored)
MAX_PENDING = 1_000_000  # undrained samples kept for storage (~28 h of 1 source at 10 Hz) before the oldest drop


def integrate(trace_t: Sequence[float], trace_w: Sequence[float], t0: float, t1: float) -> float:
    """Joules of a power trace over [t0, t1]: trapezoid rule, power interpolated linearly at the edges.

    Outside the sampled span the first/last power is held constant. `trace_t` (s) must be ascending.
    """
    t = np.asarray(trace_t, dtype=float)
    w = np.asarray(trace_w, dtype=float)
    if t.size == 0 or t.size != w.size:
        raise ValueError(f"integrate needs matching non-empty traces, got {t.size} times and {w.size} powers")
    if t1 < t0:
        raise ValueError(f"window ends before it starts: t0={t0} t1={t1}")
    inside = (t > t0) & (t < t1)
    ts = np.concatenate(([t0], t[inside], [t1]))  # (n_inside + 2,)
    ws = np.interp(ts, t, w)  # np.interp holds the end values outside [t[0], t[-1]]
    return float(np.trapezoid(ws, ts))


def counter_delta(trace_t: Sequence[float], trace_e: Sequence[float], t0: float, t1: float) -> float:
    """Joules of a cumulative counter over [t0, t1], interpolated linearly at the edges.

    Beyond the sampled span the counter is extended at the rate of the nearest sampled interval.
    """
    t = np.asarray(trace_t, dtype=float)
    e = np.asarray(trace_e, dtype=float)
    if t.size < 2 or t.size != e.size:
        raise ValueError(f"counter_delta needs >= 2 matching samples, got {t.size} times and {e.size} counts")
    if t1 < t0:
        raise ValueError(f"window ends before it starts: t0={t0} t1={t1}")
    rate_lo = _rate(t[0], t[1], e[0], e[1])
    rate_hi = _rate(t[-2], t[-1], e[-2], e[-1])

    def at(x: float) -> float:
        if x < t[0]:
            return float(e[0] - rate_lo * (t[0] - x))
        if x > t[-1]:
            return float(e[-1] + rate_hi * (x - t[-1]))
        return float(np.interp(x, t, e))

    return at(t1) - at(t0)


def _rate(ta: float, tb: float, ea: float, eb: float) -> float:
    """Watts between two counter samples (0 when they share a timestamp)."""
    return (eb - ea) / (tb - ta) if tb > ta else 0.0


def source_energy(samples: Sequence[PowerSample], t0: float, t1: float) -> float | None:
    """One source's joules over [t0, t1] from its samples: counter if every sample has one, else power."""
    if len(samples) >= 2 and all(s.energy_j is not None for s in samples):
        return counter_delta([s.t_s for s in samples], [s.energy_j for s in samples], t0, t1)
    powered = [s for s in samples if s.power_w is not None]
    if not powered:
        return None
    return integrate([s.t_s for s in powered], [s.power_w for s in powered], t0, t1)


class PowerSampler:
    """Samples every source at `hz` on a daemon thread; answers the energy of past windows.

    The sampler owns its sources: `close()` (and leaving a `with` block) stops it and closes them. `clock` (epoch
    seconds) stamps `measure()` spans and the idle baseline and ages retained samples; it must be the sources' clock.
    """

    def __init__(
        self,
        sources: Sequence[PowerSource],
        hz: float = DEFAULT_HZ,
        retain_s: float = RETAIN_S,
        clock: Callable[[], float] = time.time,
    ):
        names = [s.name for s in sources]
        if not sources:
            raise PowerError("PowerSampler needs at least one power source (see `greenspec power`)")
        if len(set(names)) != len(names):
            raise PowerError(f"power sources must be distinct, got {names}")
        if not hz > 0:
            raise PowerError(f"sampling rate hz={hz} must be > 0 (the default is {DEFAULT_HZ:g})")
        self.sources = list(sources)
        self.hz = float(hz)
        self.retain_s = retain_s
        self.clock = clock
        self._measured = {s.name: s.measured for s in sources}
        self._traces: dict[str, list[PowerSample]] = {name: [] for name in names}
        self._pending: collections.deque[PowerSample] = collections.deque(maxlen=MAX_PENDING)
        self._lock = threading.Lock()  # guards source reads and the sample stores
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed: set[str] = set()
        self._closed = False
        if any(self._measured.values()) and not all(self._measured.values()):
            logger.warning(
                "measured and estimated sources sampled together; windows count the measured ones only (%s)",
                ", ".join(n for n, m in self._measured.items() if m),
            )

    @property
    def running(self) -> bool:
        """Whether the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def measured(self) -> bool:
        """Whether windows will be measured (any measured source) or estimated."""
        return any(self._measured.values())

    def start(self) -> PowerSampler:
        """Take one sample now and start the background thread (no-op if running)."""
        if self._closed:
            raise PowerError("this PowerSampler is closed; build a new one with fresh sources")
        if self.running:
            return self
        self._stop.clear()
        self.sample_now()
        self._thread = threading.Thread(target=self._run, name="greenspec-power-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread after a last sample (sources stay open; `start()` resumes)."""
        if not self.running:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sample_now()

    def close(self) -> None:
        """Stop and close every source."""
        if self._closed:
            return
        self.stop()
        self._closed = True
        for src in self.sources:
            src.close()

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _run(self) -> None:
        """Thread body: sample on a fixed grid of ticks, skipping ticks missed rather than bursting."""
        period = 1.0 / self.hz
        next_t = time.monotonic()
        while True:
            next_t += period
            if self._stop.wait(max(0.0, next_t - time.monotonic())):
                return
            self.sample_now()
            now = time.monotonic()
            if now > next_t + period:
                next_t = now

    def sample_now(self) -> list[PowerSample]:
        """Read every source once (a source that fails is logged once and skipped); return the samples."""
        if self._closed:
            return []
        taken = []
        with self._lock:
            for src in self.sources:
                try:
                    r = src.read()
                except (PowerError, OSError) as err:
                    if src.name not in self._failed:
                        logger.warning("power source %s failed to read: %s", src.name, err)
                        self._failed.add(src.name)
                    continue
                sample = PowerSample(
                    t_s=r.t_s, source=src.name, power_w=r.power_w, energy_j=r.energy_j, measured=src.measured
                )
                self._traces[src.name].append(sample)
                taken.append(sample)
            self._pending.extend(taken)
            self._prune(self.clock() - self.retain_s)
        return taken

    def _prune(self, before_s: float) -> None:
        """Forget window samples older than `before_s`, keeping one before it for edge interpolation."""
        for trace in self._traces.values():
            if trace and trace[0].t_s < before_s:
                cut = bisect.bisect_left(trace, before_s, key=lambda s: s.t_s) - 1
                if cut > 0:
                    del trace[:cut]

    def drain_samples(self) -> list[PowerSample]:
        """The samples taken since the previous drain, oldest first (for storage)."""
        with self._lock:
            out = list(self._pending)
            self._pending.clear()
        return out

    def samples(self, source: str | None = None) -> list[PowerSample]:
        """A copy of the retained samples of one source, or of all sources in time order."""
        with self._lock:
            if source is not None:
                return list(self._traces[source])
            return sorted((s for tr in self._traces.values() for s in tr), key=lambda s: s.t_s)

    def window(self, t0: float, t1: float, only: Sequence[str] | None = None) -> EnergyWindow:
        """Energy over [t0, t1] (epoch s), optionally over the sources named in `only`; see the module doc."""
        if t1 < t0:
            raise PowerError(f"energy window ends before it starts: t0={t0:.3f} t1={t1:.3f}")
        names = list(only) if only is not None else list(self._traces)
        unknown = [n for n in names if n not in self._traces]
        if unknown:
            raise PowerError(f"power source(s) {unknown} not sampled here; sampled: {list(self._traces)}")
        self._cover(t1, names)
        with self._lock:
            traces = {n: _around(self._traces[n], t0, t1) for n in names}
        any_measured = any(self._measured[n] and traces[n] for n in names)
        counted = [n for n in names if traces[n] and self._measured[n] == any_measured]
        by_source = {n: e for n in counted if (e := source_energy(traces[n], t0, t1)) is not None}
        if not by_source:
            raise PowerError(f"no power samples from {names} to measure the window {t0:.3f}-{t1:.3f}")
        energy_j = sum(by_source.values())
        n_samples = sum(1 for n in by_source for s in traces[n] if t0 <= s.t_s <= t1)
        wall_s = t1 - t0
        return EnergyWindow(
            t0_s=t0,
            t1_s=t1,
            energy_j=energy_j,
            mean_power_w=energy_j / wall_s if wall_s > 0 else _power_at(traces, by_source, t0),
            sources=tuple(by_source),
            measured=any_measured,
            n_samples=n_samples,
            by_source_j=by_source,
        )

    def _cover(self, t1: float, names: Sequence[str]) -> None:
        """Sample now if a source's last sample precedes t1: the window's end is then interpolated."""
        with self._lock:
            behind = any(not self._traces[n] or self._traces[n][-1].t_s < t1 for n in names)
        if behind and not self._closed:
            self.sample_now()

    @contextlib.contextmanager
    def measure(self) -> Iterator[Span]:
        """Time a block and fill `span.window` with its energy on exit (e.g. around training an instance base)."""
        span = Span(t0_s=self.clock())
        yield span
        span.window = self.window(span.t0_s, self.clock())

    def idle_baseline(self, seconds: float) -> dict:
        """Sample an idle machine for `seconds`: its mean power, reported beside (not subtracted from) totals."""
        started_here = not self.running
        if started_here:
            self.start()
        try:
            t0 = self.clock()
            time.sleep(seconds)
            win = self.window(t0, self.clock())
        finally:
            if started_here:
                self.stop()
        return {
            "seconds": win.wall_s,
            "t0_s": win.t0_s,
            "t1_s": win.t1_s,
            "energy_j": win.energy_j,
            "mean_power_w": win.mean_power_w,
            "sources": list(win.sources),
            "measured": win.measured,
            "n_samples": win.n_samples,
            "by_source_w": {n: j / win.wall_s for n, j in win.by_source_j.items()} if win.wall_s > 0 else {},
        }


def _around(trace: list[PowerSample], t0: float, t1: float) -> list[PowerSample]:
    """The samples inside [t0, t1] plus one on each side (what edge interpolation needs), as a copy."""
    lo = bisect.bisect_left(trace, t0, key=lambda s: s.t_s) - 1
    hi = bisect.bisect_right(trace, t1, key=lambda s: s.t_s) + 1
    return trace[max(lo, 0) : hi]


class Span:
    """A block timed by `PowerSampler.measure()`: its start, and its `EnergyWindow` once the block ends."""

    def __init__(self, t0_s: float):
        self.t0_s = t0_s
        self.window: EnergyWindow | None = None


def _power_at(traces: dict[str, list[PowerSample]], names: Sequence[str], t: float) -> float:
    """Summed instantaneous watts at t (the mean power of a zero-length window)."""
    total = 0.0
    for n in names:
        powered = [s for s in traces[n] if s.power_w is not None]
        if powered:
            total += float(np.interp(t, [s.t_s for s in powered], [s.power_w for s in powered]))
    return total
