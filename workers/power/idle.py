"""The idle power floor: what the machine draws doing nothing, measured for a second before a run starts.

Stored on the experiment (`idle_power_w`) and shown by `greenspec doctor`, beside every energy figure (never
subtracted from it). Only a meter can measure it: where the estimate is the only source the floor is unknown (None),
since the estimate's floor is a setting (`GREENSPEC_CPU_IDLE_W`), not a measurement.

Example:
    >>> measure_idle_floor_w(("auto",))       # 1 s of sampling where a meter exists
    41.8
    >>> describe_idle_floor(None)
    'unknown (no measured power source: the estimate has no floor to measure)'
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from workers.errors import PowerError
from workers.power.base import PowerSource
from workers.power.factory import find_sources
from workers.power.sampler import PowerSampler

logger = logging.getLogger(__name__)

IDLE_FLOOR_S = 1.0  # seconds of sampling: 20 samples at the default rate below
IDLE_FLOOR_HZ = 20.0


def measure_idle_floor_w(
    source_names: Sequence[str],
    seconds: float = IDLE_FLOOR_S,
    hz: float = IDLE_FLOOR_HZ,
    open_sources: Callable[[tuple[str, ...]], list[PowerSource]] = find_sources,
) -> float | None:
    """Mean watts of the measured sources among `source_names` over `seconds`; None where none is measured or none
    opens (the run goes on without a floor)."""
    try:
        sources = open_sources(tuple(source_names))
    except PowerError as err:
        logger.info("idle floor not measured: %s", err)
        return None
    measured = [s for s in sources if s.measured]
    for src in sources:
        if not src.measured:
            src.close()
    if not measured:
        return None
    with PowerSampler(measured, hz=hz) as sampler:
        return sampler.idle_baseline(seconds)["mean_power_w"]


def describe_idle_floor(idle_w: float | None, seconds: float = IDLE_FLOOR_S) -> str:
    """One line for the floor: its watts, or why it is unknown."""
    if idle_w is None:
        return "unknown (no measured power source: the estimate has no floor to measure)"
    return f"{idle_w:.1f} W (mean over {seconds:g} s at rest)"
