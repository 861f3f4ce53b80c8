"""A power source that replays a given trace, for energy figures worked out by hand (the hardware seam, faked)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.records import plain_generation
from workers.contracts import GenerationRecord, LabelRecord
from workers.errors import PowerError
from workers.power import PowerSampler, PowerSource, Reading
from workers.power.base import WrappingCounter


class TraceSource(PowerSource):
    """Replays readings at given times: watts, and/or a raw joule counter that wraps at `counter_range_j`.

    Each `read()` returns the next reading; the raw counter is unwrapped by the same `WrappingCounter` the
    real counter sources use. Past the trace's end a read raises `PowerError` (the sampler logs and skips it).
    """

    def __init__(
        self,
        t_s: Sequence[float],
        power_w: Sequence[float] | None = None,
        raw_energy_j: Sequence[float] | None = None,
        counter_range_j: float | None = None,
        name: str = "trace",
        measured: bool = True,
    ):
        self.name, self.measured, self.detail = name, measured, f"replayed trace of {len(t_s)} readings"
        self.t_s, self.power_w, self.raw_energy_j = list(t_s), power_w, raw_energy_j
        self._counter = WrappingCounter(counter_range_j)
        self._next = 0

    @classmethod
    def open(cls) -> TraceSource:
        raise PowerError("a trace source is built from a trace, not opened")

    def read(self) -> Reading:
        i = self._next
        if i >= len(self.t_s):
            raise PowerError(f"trace exhausted after {i} readings")
        self._next += 1
        energy_j = None if self.raw_energy_j is None else self._counter.update(self.raw_energy_j[i])
        power_w = None if self.power_w is None else self.power_w[i]
        return Reading(t_s=self.t_s[i], power_w=power_w, energy_j=energy_j)


def replayed(*sources: TraceSource) -> PowerSampler:
    """A sampler that has taken every reading of the traces (read together, one per source per step); no thread.

    Its clock stands at the traces' end, so none of their samples count as old.
    """
    end_s = max(t for src in sources for t in src.t_s)
    sampler = PowerSampler(list(sources), clock=lambda: end_s)
    for _ in range(max(len(src.t_s) for src in sources)):
        sampler.sample_now()
    return sampler


# Watts sampled 1 s apart, changing between samples: a window edge between samples lies on a slope.
def trace() -> TraceSource:
    return TraceSource([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0, 20.0, 20.0, 60.0, 60.0, 30.0, 30.0], name="nvml")


def generation(started_at: float, ended_at: float, n_tokens: int) -> GenerationRecord:
    return plain_generation(tuple(range(n_tokens)), started_at, ended_at, text="", verify_s=0.0)


def label_pass(started_at: float, ended_at: float, n_tokens: int) -> LabelRecord:
    return LabelRecord(
        path="m.json",
        sha256="0" * 64,
        bytes=1,
        n_tokens=n_tokens,
        n_docs=1,
        n_labelled=n_tokens,
        agreement=1.0,
        chunk_tokens=512,
        overlap_tokens=128,
        wall_s=ended_at - started_at,
        started_at=started_at,
        ended_at=ended_at,
        device="cpu",
    )
