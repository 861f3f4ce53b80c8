"""RAPL from a fake powercap tree in tmp_path: zone discovery, unit conversion, wraparound, the sampler on it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from workers.errors import PowerError
from workers.power import PowerSampler, RaplSource, find_sources


def write_attr(path: Path, value) -> None:
    """Replace a sysfs-like attribute atomically (a reader never sees a half-written number)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)


def make_zone(path: Path, name: str, energy_uj: int, max_uj: int) -> Path:
    """One powercap zone directory with name, energy_uj and max_energy_range_uj."""
    path.mkdir(parents=True)
    write_attr(path / "name", name)
    write_attr(path / "energy_uj", energy_uj)
    write_attr(path / "max_energy_range_uj", max_uj)
    return path


@pytest.fixture
def tree(tmp_path):
    """A one-package tree: package-0 with core (skipped) and dram subzones, plus psys and mmio (both skipped)."""
    root = tmp_path / "powercap"
    pkg = make_zone(root / "intel-rapl:0", "package-0", 1_000_000, 10_000_000)
    make_zone(pkg / "intel-rapl:0:0", "core", 900_000, 10_000_000)
    dram = make_zone(pkg / "intel-rapl:0:1", "dram", 500_000, 20_000_000)
    make_zone(root / "intel-rapl:1", "psys", 0, 10_000_000)
    make_zone(root / "intel-rapl-mmio:0", "package-0", 0, 10_000_000)
    return {"root": root, "package": pkg, "dram": dram}


def test_finds_package_and_dram_only(tree):
    src = RaplSource.open(tree["root"])
    assert [z.label for z in src.zones] == ["package-0", "package-0/dram"]
    assert src.name == "rapl" and src.measured is True


def test_energy_sums_package_and_dram_in_joules(tree):
    src = RaplSource.open(tree["root"])
    first = src.read()
    assert first.energy_j == 0.0
    write_attr(tree["package"] / "energy_uj", 3_000_000)  # +2 J
    write_attr(tree["dram"] / "energy_uj", 1_500_000)  # +1 J
    assert src.read().energy_j == pytest.approx(3.0)


def test_counter_wraparound_stays_monotonic(tree):
    src = RaplSource.open(tree["root"])  # package starts at 1 J of a 10 J range
    totals = []
    for raw_uj in (6_000_000, 9_500_000, 2_000_000, 8_000_000, 1_000_000):  # wraps twice
        write_attr(tree["package"] / "energy_uj", raw_uj)
        totals.append(src.read().energy_j)
    assert totals == pytest.approx([5.0, 8.5, 11.0, 17.0, 20.0])


def test_power_comes_from_counter_differences(tree):
    src = RaplSource.open(tree["root"])
    time.sleep(0.05)
    write_attr(tree["package"] / "energy_uj", 1_000_000 + 50_000)
    r = src.read()
    assert r.power_w is not None and 0.0 < r.power_w <= 1.0  # 0.05 J over at least 0.05 s


def test_sampler_window_on_a_counter_advancing_at_a_known_rate_with_wraps(tmp_path):
    rate_w = 20.0
    # starts 6 J below the top of a 100 J range: wraps 0.3 s in
    range_uj, first_uj = 100_000_000, 94_000_000
    pkg = make_zone(tmp_path / "intel-rapl:0", "package-0", first_uj, range_uj)
    src = RaplSource.open(tmp_path)
    clock = {"now_s": 0.0}
    src.clock = lambda: clock["now_s"]
    sampler = PowerSampler([src], clock=src.clock)
    for i in range(31):  # 50 Hz for 0.6 s, the counter written before each read as the hardware would advance it
        clock["now_s"] = i * 0.02
        write_attr(pkg / "energy_uj", int(first_uj + rate_w * clock["now_s"] * 1e6) % range_uj)
        sampler.sample_now()
    win = sampler.window(0.05, 0.55)
    assert win.sources == ("rapl",) and win.measured is True
    assert int((pkg / "energy_uj").read_text()) < first_uj  # the counter did wrap
    assert win.energy_j == pytest.approx(rate_w * 0.5)
    assert win.mean_power_w == pytest.approx(rate_w)
    assert win.n_samples == 25  # 0.06 .. 0.54 s
    assert [s.power_w for s in sampler.samples("rapl")[1:]] == pytest.approx([rate_w] * 30)


def test_failing_zone_is_skipped_by_the_sampler_not_fatal(tree, caplog):
    src = RaplSource.open(tree["root"])
    sampler = PowerSampler([src], hz=50.0)
    assert len(sampler.sample_now()) == 1
    (tree["dram"] / "energy_uj").unlink()
    assert sampler.sample_now() == []
    assert "rapl failed to read" in caplog.text and "energy_uj" in caplog.text


def test_missing_tree_and_junk_counters_are_one_line_errors(tmp_path, tree, monkeypatch):
    monkeypatch.setenv("GREENSPEC_RAPL_ROOT", str(tmp_path / "absent"))
    with pytest.raises(PowerError, match="GREENSPEC_RAPL_ROOT") as err:
        find_sources(["rapl"])
    assert "\n" not in str(err.value)
    write_attr(tree["package"] / "energy_uj", "garbage")
    with pytest.raises(PowerError, match=r"energy_uj holds 'garbage'"):
        RaplSource.open(tree["root"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PowerError, match="no intel-rapl:N package zone"):
        RaplSource.open(empty)


def test_root_comes_from_the_environment(tree, monkeypatch):
    monkeypatch.setenv("GREENSPEC_RAPL_ROOT", str(tree["root"]))
    [src] = find_sources(["rapl"])
    assert src.detail == "package-0, package-0/dram"
