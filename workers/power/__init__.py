"""Power and energy: one `PowerSource` seam, a module per meter, a sampler, and a factory that picks; whose
joules a window's energy is (`attribution`), and the idle floor measured before a run (`idle`).

Sources (names as printed and stored): `nvml` (NVIDIA GPUs), `rapl` (Linux CPU package + DRAM),
`powermetrics` (macOS CPU+GPU+ANE), and `estimate` (CPU utilisation x TDP, always labelled estimated).

Example:
    >>> from workers.power import PowerSampler, find_sources, j_per_100_tokens
    >>> with PowerSampler(find_sources("auto"), hz=10.0) as sampler:
    ...     with sampler.measure() as span:
    ...         result = generate(...)
    >>> span.window.energy_j, span.window.measured, j_per_100_tokens(span.window.energy_j, 100)
"""

from workers.errors import PowerError
from workers.power.base import (
    SOURCE_NAMES,
    EnergyWindow,
    PowerSample,
    PowerSource,
    Probe,
    Reading,
    SourceSummary,
)
from workers.power.energy import j_per_100_tokens, mean_power_w, tokens_per_j
from workers.power.estimate import EstimateSource
from workers.power.factory import REGISTRY, find_sources, format_survey, probe, survey
from workers.power.nvml import NvmlSource
from workers.power.powermetrics import PowermetricsSource, parse_powermetrics
from workers.power.rapl import RaplSource
from workers.power.sampler import PowerSampler, Span, counter_delta, integrate

__all__ = [
    "SOURCE_NAMES",
    "REGISTRY",
    "EnergyWindow",
    "EstimateSource",
    "NvmlSource",
    "PowerError",
    "PowerSample",
    "PowerSampler",
    "PowerSource",
    "PowermetricsSource",
    "Probe",
    "RaplSource",
    "Reading",
    "SourceSummary",
    "Span",
    "counter_delta",
    "find_sources",
    "format_survey",
    "integrate",
    "j_per_100_tokens",
    "mean_power_w",
    "parse_powermetrics",
    "probe",
    "survey",
    "tokens_per_j",
]
