"""NVML with `pynvml` replaced by a fake module: energy counters, power polling, absent drivers."""

from __future__ import annotations

import sys
import time
import types

import pytest

from workers.errors import PowerError
from workers.power import NvmlSource, PowerSampler, find_sources

NOT_SUPPORTED, LIBRARY_NOT_FOUND = 3, 12


class FakeGpu:
    """One device: constant power (mW) and an energy counter (mJ) advancing with the wall clock at that power."""

    def __init__(self, name: str, power_mw: int, has_counter: bool = True, counter_base_mj: int = 123_456_789):
        self.name, self.power_mw, self.has_counter = name, power_mw, has_counter
        self.t_start, self.base_mj = time.time(), counter_base_mj
        self.offset_mj = 0  # added by tests to step the counter by hand

    def energy_mj(self) -> int:
        return int(self.base_mj + self.power_mw * (time.time() - self.t_start) + self.offset_mj)


def fake_pynvml(gpus: list[FakeGpu], init_error: int | None = None) -> types.ModuleType:
    """A module with the slice of the pynvml API greenspec calls."""
    mod = types.ModuleType("pynvml")

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(value)
            self.value = value

        def __str__(self):
            return {NOT_SUPPORTED: "Not Supported", LIBRARY_NOT_FOUND: "NVML Shared Library Not Found"}[self.value]

    def init():
        if init_error is not None:
            raise NVMLError(init_error)
        mod.initialised += 1

    def shutdown():
        mod.initialised -= 1

    def energy(handle):
        if not handle.has_counter:
            raise NVMLError(NOT_SUPPORTED)
        return handle.energy_mj()

    mod.NVMLError, mod.NVML_ERROR_NOT_SUPPORTED, mod.initialised = NVMLError, NOT_SUPPORTED, 0
    mod.nvmlInit, mod.nvmlShutdown = init, shutdown
    mod.nvmlDeviceGetCount = lambda: len(gpus)
    mod.nvmlDeviceGetHandleByIndex = lambda i: gpus[i]
    mod.nvmlDeviceGetName = lambda h: h.name.encode()  # older bindings return bytes
    mod.nvmlDeviceGetPowerUsage = lambda h: h.power_mw
    mod.nvmlDeviceGetTotalEnergyConsumption = energy
    return mod


def install(monkeypatch, gpus, **kwargs) -> types.ModuleType:
    mod = fake_pynvml(gpus, **kwargs)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return mod


def test_energy_counters_of_all_gpus_are_summed(monkeypatch):
    gpus = [FakeGpu("NVIDIA H100", 250_000), FakeGpu("NVIDIA H100", 150_000)]
    install(monkeypatch, gpus)
    src = NvmlSource.open()
    assert "2 GPU(s) (energy counter)" in src.detail and "NVIDIA H100" in src.detail
    base = src.read().energy_j
    gpus[0].offset_mj += 1500
    gpus[1].offset_mj += 500
    r = src.read()
    assert r.power_w == pytest.approx(400.0)
    # 2 J stepped by hand, plus 400 W times the (tiny) time between the two reads
    assert 2.0 <= r.energy_j - base < 2.0 + 400.0 * 0.5


def test_sampler_window_from_counters_matches_the_known_rate(monkeypatch):
    install(monkeypatch, [FakeGpu("A100", 300_000)])
    with PowerSampler(find_sources(["nvml"]), hz=50.0) as sampler:
        time.sleep(0.03)
        t0 = time.time()
        time.sleep(0.2)
        t1 = time.time()
        win = sampler.window(t0, t1)
    assert win.sources == ("nvml",) and win.measured is True
    assert win.energy_j == pytest.approx(300.0 * (t1 - t0), rel=0.02)
    assert win.mean_power_w == pytest.approx(300.0, rel=0.02)


def test_a_gpu_without_counter_falls_back_to_power_polling(monkeypatch):
    install(monkeypatch, [FakeGpu("GTX 1080", 180_000, has_counter=False), FakeGpu("A100", 20_000)])
    src = NvmlSource.open()
    assert "power polling" in src.detail
    assert src.read().energy_j is None
    with PowerSampler([src], hz=50.0) as sampler:
        t0 = time.time()
        time.sleep(0.15)
        win = sampler.window(t0, time.time())
    assert win.mean_power_w == pytest.approx(200.0)  # a constant trace integrates exactly


def test_absent_driver_is_a_one_line_power_error_and_auto_moves_on(monkeypatch, tmp_path):
    install(monkeypatch, [], init_error=LIBRARY_NOT_FOUND)
    with pytest.raises(PowerError, match="NVML unavailable: NVML Shared Library Not Found") as err:
        find_sources(["nvml"])
    assert "\n" not in str(err.value)
    monkeypatch.setenv("GREENSPEC_RAPL_ROOT", str(tmp_path))
    monkeypatch.setattr("workers.power.powermetrics.platform.system", lambda: "Linux")
    assert [s.name for s in find_sources("auto")] == ["estimate"]


def test_zero_gpus_is_an_error_and_close_shuts_nvml_down(monkeypatch):
    mod = install(monkeypatch, [])
    with pytest.raises(PowerError, match="0 GPUs"):
        NvmlSource.open()
    assert mod.initialised == 0
    mod = install(monkeypatch, [FakeGpu("A100", 1000)])
    src = NvmlSource.open()
    assert mod.initialised == 1
    src.close()
    assert mod.initialised == 0
