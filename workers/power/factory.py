"""Pick power sources by name, survey them for `greenspec power`, probe them for `greenspec doctor`.

Example:
    >>> sources = find_sources()            # "auto": nvml/rapl/powermetrics present here, else the estimate
    >>> print(format_survey(survey(seconds=5.0)))
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from tabulate import tabulate

from workers.errors import PowerError
from workers.power.base import SOURCE_NAMES, PowerSource, Probe, SourceSummary
from workers.power.estimate import EstimateSource
from workers.power.nvml import NvmlSource
from workers.power.powermetrics import PowermetricsSource
from workers.power.rapl import RaplSource
from workers.power.sampler import DEFAULT_HZ, PowerSampler

logger = logging.getLogger(__name__)

REGISTRY: dict[str, type[PowerSource]] = {
    "nvml": NvmlSource,
    "rapl": RaplSource,
    "powermetrics": PowermetricsSource,
    "estimate": EstimateSource,
}
MEASURED = ("nvml", "rapl", "powermetrics")  # what "auto" tries, in this order
assert tuple(REGISTRY) == SOURCE_NAMES


def _as_names(names: str | Sequence[str]) -> list[str]:
    """Names as a de-duplicated list; a comma-separated string is split ("nvml,rapl")."""
    if isinstance(names, str):
        names = names.split(",")
    out = [n.strip().lower() for n in names if n.strip()]
    if not out:
        raise PowerError("no power source named; use auto or any of " + ", ".join(SOURCE_NAMES))
    return list(dict.fromkeys(out))


def _auto() -> list[PowerSource]:
    """Every measured source present here, else the estimate alone."""
    found = []
    for name in MEASURED:
        try:
            found.append(REGISTRY[name].open())
        except PowerError as err:
            logger.info("power source %s absent: %s", name, err)
    if not found:
        logger.info("no power meter here; using the labelled CPU estimate")
        found = [EstimateSource.open()]
    return found


def find_sources(names: str | Sequence[str] = ("auto",)) -> list[PowerSource]:
    """Open sources by name (auto, nvml, rapl, powermetrics, estimate); PowerError if one asked for is absent."""
    opened: list[PowerSource] = []
    try:
        for name in _as_names(names):
            if name not in REGISTRY and name != "auto":
                raise PowerError(f"unknown power source {name!r}; use auto or any of " + ", ".join(SOURCE_NAMES))
            have = {s.name for s in opened}
            new = _auto() if name == "auto" else [] if name in have else [REGISTRY[name].open()]
            for src in new:
                if src.name in have:
                    src.close()
                else:
                    opened.append(src)
    except PowerError:
        for src in opened:
            src.close()
        raise
    return opened


def survey(seconds: float = 5.0, names: str | Sequence[str] = ("auto",), hz: float = DEFAULT_HZ) -> list[SourceSummary]:
    """Sample the sources found for `seconds` and summarise each one's mean watts (for `greenspec power`)."""
    if not seconds > 0:
        raise PowerError(f"--seconds {seconds} must be > 0")
    sources = find_sources(names)
    rows = []
    with PowerSampler(sources, hz=hz) as sampler:
        t0 = time.time()
        time.sleep(seconds)
        t1 = time.time()
        for src in sources:
            win = sampler.window(t0, t1, only=[src.name])
            rows.append(
                SourceSummary(
                    name=src.name,
                    measured=src.measured,
                    mean_power_w=win.mean_power_w,
                    energy_j=win.energy_j,
                    seconds=win.wall_s,
                    n_samples=win.n_samples,
                    detail=src.detail,
                )
            )
    return rows


def format_survey(rows: Sequence[SourceSummary]) -> str:
    """The survey as a plain-text table, one source a row, each marked measured or estimated."""
    table = [
        (
            r.name,
            "measured" if r.measured else "ESTIMATED",
            f"{r.mean_power_w:.1f}",
            f"{r.energy_j:.1f}",
            f"{r.seconds:.1f}",
            r.n_samples,
            r.detail,
        )
        for r in rows
    ]
    text = tabulate(
        table, headers=("source", "kind", "mean W", "energy J", "seconds", "samples", "detail"), disable_numparse=True
    )
    if rows and not any(r.measured for r in rows):
        text += "\nNo power meter found: figures are estimates from CPU utilisation (GREENSPEC_CPU_TDP_W)."
    return text


def probe() -> list[Probe]:
    """Whether each source opens here, and what it found or why not (for `greenspec doctor`)."""
    out = []
    for name, cls in REGISTRY.items():
        try:
            src = cls.open()
        except PowerError as err:
            out.append(Probe(name, False, cls.measured, str(err)))
            continue
        out.append(Probe(name, True, src.measured, src.detail))
        src.close()
    return out
