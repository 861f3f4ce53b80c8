"""The estimate's edges, each a case the model or its settings could get wrong (written against mutants of
workers/power/estimate.py): CPU times without iowait or guest fields, small intervals, settings of 0 W or blank."""

from __future__ import annotations

from collections import namedtuple

import psutil
import pytest

from workers.errors import PowerError
from workers.power import EstimateSource
from workers.power.estimate import _read_cpuinfo, cpu_model, default_tdp_w

# macOS's fields as psutil names them: no iowait, no guest
MacTimes = namedtuple("MacTimes", "user nice system idle")
LinuxTimes = namedtuple("LinuxTimes", "user nice system idle iowait irq softirq steal guest guest_nice")


def scripted(*readings):
    it = iter(readings)
    return lambda: next(it)


def test_utilisation_without_iowait_or_guest_fields():
    src = EstimateSource(65.0, 10.0, cpu_times=scripted(MacTimes(1.0, 0.0, 1.0, 2.0), MacTimes(1.4, 0.0, 1.0, 2.1)))
    assert src.utilisation() == pytest.approx(0.5)  # 2 busy of 4 since boot
    assert src.utilisation() == pytest.approx(0.8)  # +0.4 busy, +0.1 idle: under one CPU second counts too


def test_guest_nice_is_taken_out_of_the_total_like_guest():
    # 10 CPU s since boot: user 4 (guest 1 and guest_nice 1 inside it), idle 6; the fields sum to 12
    boot = LinuxTimes(4.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0)
    later = LinuxTimes(4.6, 0.0, 0.0, 6.2, 0.0, 0.0, 0.0, 0.0, 1.1, 1.1)  # +0.8 CPU s, 0.6 of them busy
    src = EstimateSource(65.0, 10.0, cpu_times=scripted(boot, later))
    assert src.utilisation() == pytest.approx(0.4)
    assert src.utilisation() == pytest.approx(0.6 / 0.8)


def test_no_time_since_boot_reads_as_idle():
    zero = MacTimes(0.0, 0.0, 0.0, 0.0)
    assert EstimateSource(65.0, 10.0, cpu_times=scripted(zero)).read().power_w == 10.0


def test_detail_names_the_model_and_where_the_tdp_came_from(monkeypatch):
    src = EstimateSource(65.0, 10.0)
    assert src.detail == f"estimated: 10 W idle + CPU utilisation x 65 W TDP over {psutil.cpu_count()} cores"
    src = EstimateSource(90.0, 5.0, tdp_from="TDP from GREENSPEC_CPU_TDP_W")
    assert src.detail == (
        f"estimated: 5 W idle + CPU utilisation x 90 W TDP over {psutil.cpu_count()} cores; "
        "TDP from GREENSPEC_CPU_TDP_W"
    )
    monkeypatch.setattr(psutil, "cpu_count", lambda: None)  # psutil cannot tell: one core
    assert EstimateSource(65.0, 10.0).n_cores == 1


def test_settings_of_zero_or_blank_and_their_errors(monkeypatch, tmp_path):
    monkeypatch.setattr("workers.power.estimate.CPUINFO", tmp_path / "absent")
    monkeypatch.setenv("GREENSPEC_CPU_IDLE_W", "0")
    assert EstimateSource.open().idle_w == 0.0  # 0 W is a setting, not an error
    monkeypatch.setenv("GREENSPEC_CPU_IDLE_W", "0.5")
    assert EstimateSource.open().idle_w == 0.5
    monkeypatch.setenv("GREENSPEC_CPU_IDLE_W", "  ")
    assert EstimateSource.open().idle_w == 10.0  # blank: the default
    monkeypatch.setenv("GREENSPEC_CPU_IDLE_W", "-1")
    with pytest.raises(PowerError, match=r"^GREENSPEC_CPU_IDLE_W='-1' must be >= 0 watts$"):
        EstimateSource.open()
    monkeypatch.setenv("GREENSPEC_CPU_IDLE_W", "ten")
    with pytest.raises(PowerError, match=r"^GREENSPEC_CPU_IDLE_W='ten' is not a number of watts"):
        EstimateSource.open()


def test_cpuinfo_unreadable_bytes_absent_file_and_no_model_name(monkeypatch, tmp_path):
    odd = tmp_path / "cpuinfo"
    odd.write_bytes(b"model name\t: Intel(R) Core(TM) i9-13900K \xff\n")
    monkeypatch.setattr("workers.power.estimate.CPUINFO", odd)
    assert _read_cpuinfo() == "model name\t: Intel(R) Core(TM) i9-13900K \ufffd\n"
    monkeypatch.setattr("workers.power.estimate.CPUINFO", tmp_path / "absent")
    assert _read_cpuinfo() == ""
    assert cpu_model("") == ("", 1)
    assert default_tdp_w("") == (65.0, "default TDP (CPU 'unknown' not in the table)")
