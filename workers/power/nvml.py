"""NVIDIA GPUs through NVML (`nvidia-ml-py`, imported as `pynvml`).

One source covers every visible GPU, summed: the verifier may be sharded across devices and a
generation's energy is that of all of them. Each read polls `nvmlDeviceGetPowerUsage` (mW) on every
device for the trace; where every device has the total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`,
mJ since the driver loaded; Volta and newer) the reading also carries cumulative joules, which the
sampler prefers over integrating power. If any device lacks the counter, energy comes from the power trace.
"""

from __future__ import annotations

import logging
import time

from workers.errors import PowerError
from workers.power.base import PowerSource, Reading, WrappingCounter

logger = logging.getLogger(__name__)


def _import_pynvml():
    """The vendor module (imported late so tests can replace it in sys.modules)."""
    try:
        import pynvml
    except ImportError as err:
        raise PowerError(
            "NVML unavailable: the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
        ) from err
    return pynvml


def _has_energy_counter(nvml, handle) -> bool:
    """Whether this GPU answers the total-energy counter call (pre-Volta and some vGPUs do not)."""
    try:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except nvml.NVMLError as err:
        logger.info("NVML energy counter not supported on this GPU (%s); polling power instead", err)
        return False
    return True


class NvmlSource(PowerSource):
    """All visible NVIDIA GPUs summed: power polled in mW, energy from mJ counters where every GPU has one."""

    name = "nvml"
    measured = True

    def __init__(self, nvml, handles: list, use_counter: bool, names: list[str]):
        self._nvml = nvml
        self._handles = handles
        self._counters = [WrappingCounter() for _ in handles] if use_counter else None
        mode = "energy counter" if use_counter else "power polling"
        self.detail = f"{len(handles)} GPU(s) ({mode}): " + ", ".join(names)
        self.read()  # prime the counters: energy counts from open

    @classmethod
    def open(cls) -> NvmlSource:
        """Initialise NVML and take every device; PowerError when there is no driver or no GPU."""
        nvml = _import_pynvml()
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            raise PowerError(f"NVML unavailable: {err} (no NVIDIA driver or GPU visible)") from err
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            names = [_as_str(nvml.nvmlDeviceGetName(h)) for h in handles]
        except nvml.NVMLError as err:
            nvml.nvmlShutdown()
            raise PowerError(f"NVML cannot list GPUs: {err}") from err
        if not handles:
            nvml.nvmlShutdown()
            raise PowerError("NVML unavailable: the driver reports 0 GPUs (check CUDA_VISIBLE_DEVICES)")
        use_counter = all(_has_energy_counter(nvml, h) for h in handles)
        return cls(nvml, handles, use_counter, names)

    def read(self) -> Reading:
        """Summed watts now, and summed joules since open when every GPU has the counter."""
        t_s = time.time()
        try:
            power_w = sum(self._nvml.nvmlDeviceGetPowerUsage(h) for h in self._handles) * 1e-3  # mW -> W
            energy_j = None
            if self._counters is not None:
                mj = [
                    c.update(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h))
                    for h, c in zip(self._handles, self._counters)
                ]
                energy_j = sum(mj) * 1e-3  # mJ -> J
        except self._nvml.NVMLError as err:
            raise PowerError(f"NVML read failed: {err}") from err
        return Reading(t_s=t_s, power_w=power_w, energy_j=energy_j)

    def close(self) -> None:
        """Shut NVML down (it is reference counted, so other users in the process are unaffected)."""
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError as err:
            logger.debug("nvmlShutdown failed: %s", err)


def _as_str(name) -> str:
    """Device names come back as bytes from older bindings."""
    return name.decode() if isinstance(name, bytes) else str(name)
