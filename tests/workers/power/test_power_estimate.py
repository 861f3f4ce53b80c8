"""The estimate's model on given CPU times (idle, iowait, guest) worked out by hand, and its TDP table."""

from __future__ import annotations

from collections import namedtuple

import pytest

from workers.power import EstimateSource, PowerSampler
from workers.power.estimate import DEFAULT_TDP_W, cpu_model, default_tdp_w, model_power_w, table_tdp_w

# Linux's /proc/stat fields as psutil names them; guest time is already inside user
CpuTimes = namedtuple("CpuTimes", "user nice system idle iowait irq softirq steal guest guest_nice")


def times(user: float, system: float, idle: float, iowait: float, guest: float) -> CpuTimes:
    return CpuTimes(user, 0.0, system, idle, iowait, 0.0, 0.0, 0.0, guest, 0.0)


# since boot: 1000 CPU s (1020 summed less 20 guest), 850 of them idle or iowait: 15% busy
BOOT = times(user=100.0, system=50.0, idle=800.0, iowait=50.0, guest=20.0)
# then +60 user (10 of them guest), +20 system, +30 idle, +10 iowait: 120 CPU s, 40 idle, 80 busy
LATER = times(user=160.0, system=70.0, idle=830.0, iowait=60.0, guest=30.0)


def scripted(*readings: CpuTimes):
    it = iter(readings)
    return lambda: next(it)


def test_model_power_is_the_idle_floor_plus_the_busy_share_of_the_tdp():
    assert model_power_w(0.0, 65.0, 10.0) == 10.0
    assert model_power_w(1.0, 65.0, 10.0) == 65.0
    assert model_power_w(0.25, 90.0, 10.0) == pytest.approx(30.0)
    assert model_power_w(1.5, 90.0, 10.0) == 90.0 and model_power_w(-0.5, 90.0, 10.0) == 10.0  # clipped


def test_utilisation_counts_iowait_as_idle_and_guest_once():
    src = EstimateSource(65.0, 10.0, cpu_times=scripted(BOOT, LATER, LATER))
    assert src.utilisation() == pytest.approx(0.15)
    assert src.utilisation() == pytest.approx(
        80.0 / 120.0
    )  # not 1 - 30/120 (iowait busy), not 1 - 40/130 (guest twice)
    assert src.utilisation() == pytest.approx(80.0 / 120.0)  # no time passed: the previous value


def test_estimate_trace_through_the_sampler_integrates_the_model():
    clock = iter([0.0, 2.0, 4.0])
    src = EstimateSource(65.0, 10.0, cpu_times=scripted(BOOT, LATER, LATER), clock=lambda: next(clock))
    sampler = PowerSampler([src], clock=lambda: 4.0)
    watts = [sampler.sample_now()[0].power_w for _ in range(3)]
    busy_w = 10.0 + 55.0 * 80.0 / 120.0
    assert watts == pytest.approx([10.0 + 55.0 * 0.15, busy_w, busy_w])
    win = sampler.window(1.0, 4.0)
    # 18.25 W at 0 s, 46.67 W at 2 s and 4 s: at 1 s the midpoint 32.46 W; [1, 2] a trapezoid, [2, 4] flat
    at_1_w = (18.25 + busy_w) / 2
    assert win.energy_j == pytest.approx((at_1_w + busy_w) / 2 + 2.0 * busy_w)
    assert win.energy_j == pytest.approx(132.8958, abs=1e-4)
    assert win.measured is False and win.source_label == "estimate"


def test_tdp_comes_from_the_table_times_packages_else_the_default():
    assert table_tdp_w("Intel(R) Core(TM) i7-12700K CPU @ 3.60GHz") == ("i7-12700K", 125.0)
    assert table_tdp_w("Intel(R) Core(TM) i7-12700KF CPU") is None  # another part: no loose match
    assert table_tdp_w("AMD EPYC 7763 64-Core Processor") == ("EPYC 7763", 280.0)
    two_sockets = (
        "processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\nphysical id\t: 0\n\n"
        "processor\t: 1\nmodel name\t: AMD EPYC 7763 64-Core Processor\nphysical id\t: 1\n"
    )
    assert cpu_model(two_sockets) == ("AMD EPYC 7763 64-Core Processor", 2)
    assert default_tdp_w(two_sockets) == (560.0, "table TDP of EPYC 7763 (280 W x 2 packages)")
    tdp_w, why = default_tdp_w("model name\t: AMD EPYC\n")
    assert tdp_w == DEFAULT_TDP_W and why == "default TDP (CPU 'AMD EPYC' not in the table)"
    assert default_tdp_w("")[0] == DEFAULT_TDP_W


def test_open_names_where_the_tdp_came_from(monkeypatch, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Intel(R) Core(TM) i9-13900K\nphysical id\t: 0\n")
    monkeypatch.setattr("workers.power.estimate.CPUINFO", cpuinfo)
    monkeypatch.delenv("GREENSPEC_CPU_TDP_W", raising=False)
    src = EstimateSource.open()
    assert src.tdp_w == 125.0 and src.detail.endswith("; table TDP of i9-13900K (125 W x 1 package)")
    monkeypatch.setenv("GREENSPEC_CPU_TDP_W", "40")
    src = EstimateSource.open()
    assert src.tdp_w == 40.0 and src.detail.endswith("; TDP from GREENSPEC_CPU_TDP_W")
    monkeypatch.setattr("workers.power.estimate.CPUINFO", tmp_path / "absent")
    monkeypatch.delenv("GREENSPEC_CPU_TDP_W")
    assert EstimateSource.open().tdp_w == DEFAULT_TDP_W
