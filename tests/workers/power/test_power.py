"""The sampler end to end on this machine's estimate source, the measured/estimated rule, and the factory."""

from __future__ import annotations

import sys
import time
import types

import pytest

from workers.errors import PowerError
from workers.power import (
    SOURCE_NAMES,
    EstimateSource,
    PowerSampler,
    RaplSource,
    find_sources,
    format_survey,
    probe,
    survey,
)


@pytest.fixture
def no_meters(monkeypatch, tmp_path):
    """This machine's situation made certain: no NVML driver, no RAPL tree, not macOS."""
    mod = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def init():
        raise NVMLError("NVML Shared Library Not Found")

    mod.NVMLError, mod.nvmlInit = NVMLError, init
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    monkeypatch.setenv("GREENSPEC_RAPL_ROOT", str(tmp_path / "no-powercap"))
    monkeypatch.setattr("workers.power.powermetrics.platform.system", lambda: "Linux")


@pytest.fixture
def rapl_tree(tmp_path):
    """A minimal RAPL tree (one package) for a measured source beside the estimate."""
    pkg = tmp_path / "powercap" / "intel-rapl:0"
    pkg.mkdir(parents=True)
    for attr, value in (("name", "package-0"), ("energy_uj", 0), ("max_energy_range_uj", 10**9)):
        (pkg / attr).write_text(f"{value}\n")
    return pkg


def test_sampler_on_the_estimate_is_labelled_estimated():
    src = EstimateSource.open()
    with PowerSampler([src], hz=20.0) as sampler:
        t0 = time.time()
        sum(i * i for i in range(200_000))  # some CPU work inside the window
        time.sleep(0.25)
        t1 = time.time()
        win = sampler.window(t0, t1)
    assert win.sources == ("estimate",) and win.measured is False and win.source_label == "estimate"
    assert src.idle_w * (t1 - t0) * 0.999 <= win.energy_j <= src.tdp_w * (t1 - t0) * 1.001  # idle floor .. TDP
    assert win.mean_power_w == pytest.approx(win.energy_j / (t1 - t0))
    assert win.n_samples >= 3
    samples = sampler.drain_samples()
    assert samples and all(s.source == "estimate" and s.measured is False and s.energy_j is None for s in samples)
    assert [s.t_s for s in samples] == sorted(s.t_s for s in samples)
    assert sampler.drain_samples() == []


def test_constant_estimate_integrates_exactly(monkeypatch):
    monkeypatch.setenv("GREENSPEC_CPU_TDP_W", "40")
    monkeypatch.setenv("GREENSPEC_CPU_IDLE_W", "40")  # the model collapses to a constant 40 W
    sampler = PowerSampler([EstimateSource.open()], hz=50.0)
    with sampler.start():
        with sampler.measure() as span:
            time.sleep(0.2)
    assert span.window.mean_power_w == pytest.approx(40.0)
    assert span.window.energy_j == pytest.approx(40.0 * span.window.wall_s)
    with pytest.raises(PowerError, match="closed"):
        sampler.start()


def test_window_after_the_last_sample_takes_a_fresh_one():
    sampler = PowerSampler([EstimateSource.open()], hz=10.0)  # never started: only window's own samples
    sampler.sample_now()
    t0 = time.time()
    time.sleep(0.05)
    win = sampler.window(t0, time.time())
    assert len(sampler.samples("estimate")) == 2 and win.energy_j > 0
    sampler.close()


def test_old_samples_leave_memory_but_stay_drainable(monkeypatch):
    monkeypatch.setenv("GREENSPEC_CPU_TDP_W", "30")
    monkeypatch.setenv("GREENSPEC_CPU_IDLE_W", "30")
    sampler = PowerSampler([EstimateSource.open()], retain_s=0.05)
    for _ in range(3):
        sampler.sample_now()
    time.sleep(0.1)
    t0 = time.time()
    sampler.sample_now()
    sampler.sample_now()
    kept = sampler.samples("estimate")
    assert len(kept) == 3 and kept[0].t_s < t0 <= kept[1].t_s  # one sample before the cutoff stays for the edge
    assert len(sampler.drain_samples()) == 5
    assert sampler.window(t0, time.time()).mean_power_w == pytest.approx(30.0)


def test_measured_and_estimated_joules_are_never_summed(rapl_tree):
    sampler = PowerSampler([RaplSource.open(rapl_tree.parent), EstimateSource.open()], hz=50.0)
    sampler.sample_now()  # sampled by hand so the counter step lands between two known samples
    t0 = time.time()
    sampler.sample_now()
    (rapl_tree / "energy_uj").write_text("5000000\n")  # 5 J inside the window
    sampler.sample_now()
    t1 = time.time()
    win = sampler.window(t0, t1)
    assert win.sources == ("rapl",) and win.measured is True and set(win.by_source_j) == {"rapl"}
    assert win.energy_j == pytest.approx(5.0)
    assert {s.source for s in sampler.drain_samples()} == {"rapl", "estimate"}  # raw samples keep both
    assert sampler.window(t0, t1, only=["estimate"]).measured is False
    sampler.close()


def test_idle_baseline_reports_mean_watts_per_source():
    src = EstimateSource.open()
    with PowerSampler([src], hz=20.0) as sampler:
        base = sampler.idle_baseline(0.2)
    assert base["sources"] == ["estimate"] and base["measured"] is False
    # the window is the sampler's own clock around the sleep: at least the 0.2 s asked (a loaded machine only adds)
    assert base["seconds"] == base["t1_s"] - base["t0_s"] and base["seconds"] >= 0.2
    assert src.idle_w <= base["mean_power_w"] <= src.tdp_w
    assert base["energy_j"] == pytest.approx(base["mean_power_w"] * base["seconds"])
    assert base["by_source_w"]["estimate"] == pytest.approx(base["mean_power_w"])


def test_sampler_rejects_bad_configuration():
    with pytest.raises(PowerError, match="at least one"):
        PowerSampler([])
    with pytest.raises(PowerError, match="distinct"):
        PowerSampler([EstimateSource.open(), EstimateSource.open()])
    with pytest.raises(PowerError, match="hz=0"):
        PowerSampler([EstimateSource.open()], hz=0)
    with pytest.raises(PowerError, match="ends before it starts"):
        PowerSampler([EstimateSource.open()]).window(2.0, 1.0)


def test_estimate_settings_are_checked(monkeypatch):
    monkeypatch.setenv("GREENSPEC_CPU_TDP_W", "lots")
    with pytest.raises(PowerError, match="GREENSPEC_CPU_TDP_W='lots'"):
        EstimateSource.open()
    monkeypatch.setenv("GREENSPEC_CPU_TDP_W", "20")
    monkeypatch.setenv("GREENSPEC_CPU_IDLE_W", "30")
    with pytest.raises(PowerError, match="exceeds the TDP"):
        EstimateSource.open()


def test_auto_falls_back_to_the_estimate_and_explicit_absent_sources_fail(no_meters):
    assert [s.name for s in find_sources()] == ["estimate"]
    assert [s.name for s in find_sources("auto,estimate")] == ["estimate"]  # de-duplicated
    for name, why in (("nvml", "NVML unavailable"), ("rapl", "no RAPL powercap tree"), ("powermetrics", "macOS")):
        with pytest.raises(PowerError, match=why) as err:
            find_sources([name])
        assert "\n" not in str(err.value)
    with pytest.raises(PowerError, match="unknown power source 'joulemeter'; use auto or any of nvml"):
        find_sources(["joulemeter"])


def test_auto_takes_every_measured_source_present(no_meters, rapl_tree, monkeypatch):
    monkeypatch.setenv("GREENSPEC_RAPL_ROOT", str(rapl_tree.parent))
    assert [(s.name, s.measured) for s in find_sources("auto")] == [("rapl", True)]


def test_survey_and_its_table(no_meters):
    rows = survey(seconds=0.3, hz=20.0)
    [row] = rows
    tdp_w = EstimateSource.open().tdp_w
    assert row.name == "estimate" and row.measured is False and row.n_samples >= 3
    assert 10.0 <= row.mean_power_w <= tdp_w and row.energy_j == pytest.approx(row.mean_power_w * row.seconds)
    table = format_survey(rows)
    assert "ESTIMATED" in table and "estimate" in table and "No power meter found" in table
    with pytest.raises(PowerError, match="--seconds 0 must be > 0"):
        survey(seconds=0)


def test_probe_lists_every_source_with_a_reason(no_meters):
    rows = probe()
    assert [r.name for r in rows] == list(SOURCE_NAMES)
    by_name = {r.name: r for r in rows}
    assert by_name["estimate"].available and not by_name["estimate"].measured
    assert not by_name["rapl"].available and "GREENSPEC_RAPL_ROOT" in by_name["rapl"].detail
    assert not by_name["nvml"].available and by_name["nvml"].measured
