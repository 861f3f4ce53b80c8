"""A stand-in for `pynvml` (NVIDIA's NVML bindings) on a machine without a GPU: put this folder first on a worker's
PYTHONPATH and NVML reports one GPU drawing a known power ramp, so stored energy can be checked to the joule.

GREENSPEC_TEST_NVML_RAMP = "W0,SLOPE,T0": the GPU draws W0 + SLOPE x (t - T0) watts at epoch second t. It has no
energy counter (Not Supported), so the sampler integrates the polled power, which is exact for a ramp.
"""

from __future__ import annotations

import os
import time

NVML_ERROR_NOT_SUPPORTED = 3


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return "Not Supported"


def ramp() -> tuple[float, float, float]:
    """(W0, SLOPE, T0) from the environment."""
    w0, slope, t0 = (float(x) for x in os.environ["GREENSPEC_TEST_NVML_RAMP"].split(","))
    return w0, slope, t0


def power_w(t_s: float) -> float:
    """The fake GPU's watts at epoch second `t_s`."""
    w0, slope, t0 = ramp()
    return w0 + slope * (t_s - t0)


def nvmlInit() -> None:
    ramp()  # a missing setting fails here, not at the first read


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return 1


def nvmlDeviceGetHandleByIndex(i: int) -> int:
    return i


def nvmlDeviceGetName(handle: int) -> bytes:
    return b"Fake GPU (power ramp)"


def nvmlDeviceGetPowerUsage(handle: int) -> float:
    return power_w(time.time()) * 1000.0  # mW, as a float: no rounding to whole milliwatts


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
