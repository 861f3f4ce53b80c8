"""Whose joules (workers.power.attribution): generations and label passes take their windows, trainings a share.

Every figure is worked by hand on a replayed trace. The trainings' traces follow the estimate's linear model on a
2-CPU machine, P = 10 W + 20 W per busy CPU, so each training's true joules are known: 10 W x its CPU seconds / 2
(its part of the idle floor) + 20 W x its CPU seconds.
"""

from __future__ import annotations

import psutil
import pytest

from tests.workers.power.power_trace import TraceSource, generation, label_pass, replayed, trace
from workers.contracts import JobOutcome, ReferenceRecord, attach_energy, energy_record
from workers.power.attribution import (
    attributed_energy_j,
    cpu_share,
    idle_floor_w,
    training_energy_j,
)

T = [float(x) for x in range(16)]  # samples 1 s apart over [0, 15]


def linear_model_trace(busy: list[float], measured: bool) -> TraceSource:
    """10 W + 20 W per busy CPU at each sample; the estimate's modelled floor (10 W) where not measured."""
    src = TraceSource(T, [10.0 + 20.0 * b for b in busy], name="rapl" if measured else "estimate", measured=measured)
    if not measured:
        src.idle_w = 10.0  # what EstimateSource carries
    return src


def test_cpu_share_is_a_clipped_ratio():
    assert cpu_share(1.0, 4.0) == 0.25
    assert cpu_share(5.0, 4.0) == 1.0  # its CPU clock read after the machine's: clipped at 1
    assert cpu_share(-1.0, 4.0) == 0.0
    assert cpu_share(1.0, 0.0) == 1.0 and cpu_share(0.0, -2.0) == 1.0  # no busy time counted: nobody else


def test_attributed_energy_is_the_idle_share_of_capacity_plus_the_cpu_share_of_the_rest():
    # 400 J over 10 s on 2 CPUs, floor 10 W: 100 J idle of which 10 / 20 CPU s; 300 J above it x 10 / 15 busy CPU s
    assert attributed_energy_j(400.0, 10.0, own_cpu_s=10.0, machine_cpu_s=15.0, idle_w=10.0, n_cpus=2) == 250.0
    assert attributed_energy_j(None, 10.0, 10.0, 15.0, 10.0, 2) is None
    # a floor above what was measured counts as all of it: 40 J idle, charged 4 of 8 CPU s; nothing above it
    assert attributed_energy_j(40.0, 4.0, own_cpu_s=4.0, machine_cpu_s=4.0, idle_w=25.0, n_cpus=2) == 20.0
    # more CPU seconds than the window's capacity (clocks read apart): the whole floor, never more
    assert attributed_energy_j(100.0, 5.0, own_cpu_s=12.0, machine_cpu_s=12.0, idle_w=10.0, n_cpus=2) == 100.0
    # a zero-length window has no capacity to charge the floor to: the rest by CPU share only
    assert attributed_energy_j(0.0, 0.0, own_cpu_s=1.0, machine_cpu_s=2.0, idle_w=10.0, n_cpus=2) == 0.0
    # no floor: the old rule, energy x CPU share
    assert attributed_energy_j(90.0, 3.0, own_cpu_s=1.0, machine_cpu_s=4.0, idle_w=0.0, n_cpus=2) == 22.5


@pytest.mark.parametrize("measured", [False, True])
def test_trainings_busy_apart_inside_overlapping_windows_pay_the_idle_floor_once(measured):
    # A busy on one CPU over [0, 2] (ramping off to 3): 2.5 CPU s, window [0, 10];
    # B busy over [12, 15] (ramping on from 11): 3.5 CPU s, window [5, 15]. The machine idles at 10 W in between.
    busy = [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    sampler = replayed(linear_model_trace(busy, measured))
    win_a, win_b = sampler.window(0.0, 10.0), sampler.window(5.0, 15.0)
    assert (win_a.energy_j, win_b.energy_j) == pytest.approx((150.0, 170.0))  # 100 + 20 x 2.5; 100 + 20 x 3.5
    assert idle_floor_w(sampler, win_a) == idle_floor_w(sampler, win_b) == 10.0
    a_j = training_energy_j(sampler, win_a, own_cpu_s=2.5, machine_cpu_s=2.5, n_cpus=2)
    b_j = training_energy_j(sampler, win_b, own_cpu_s=3.5, machine_cpu_s=3.5, n_cpus=2)
    assert (a_j, b_j) == pytest.approx((10 * 2.5 / 2 + 20 * 2.5, 10 * 3.5 / 2 + 20 * 3.5))  # 62.5, 87.5
    total = sampler.window(0.0, 15.0).energy_j
    assert total == pytest.approx(270.0)
    # what nobody used: the floor over the 30 - 6 CPU s of capacity left idle, 10 W x 24 / 2
    assert a_j + b_j + 10.0 * (2 * 15 - 2.5 - 3.5) / 2 == pytest.approx(total)


def test_overlapping_trainings_share_the_measured_energy_exactly():
    # A busy on one CPU from 0 to 9 (off by 10): 9.5 CPU s, window [0, 10];
    # B busy on the other from 5 on (ramping on from 4): 10.5 CPU s, window [4, 15]
    a = [1] * 10 + [0] * 6
    b = [0] * 5 + [1] * 11
    sampler = replayed(linear_model_trace([x + y for x, y in zip(a, b)], measured=False))
    win_a, win_b = sampler.window(0.0, 10.0), sampler.window(4.0, 15.0)
    # A's window: 100 J floor + 20 W x (9.5 own + 5.5 of B's) CPU s; B's: 110 J + 20 W x (5.5 of A's + 10.5 own)
    assert (win_a.energy_j, win_b.energy_j) == pytest.approx((400.0, 430.0))
    a_j = training_energy_j(sampler, win_a, own_cpu_s=9.5, machine_cpu_s=15.0, n_cpus=2)
    b_j = training_energy_j(sampler, win_b, own_cpu_s=10.5, machine_cpu_s=16.0, n_cpus=2)
    assert (a_j, b_j) == pytest.approx((10 * 9.5 / 2 + 20 * 9.5, 10 * 10.5 / 2 + 20 * 10.5))  # 237.5, 262.5
    total = sampler.window(0.0, 15.0).energy_j
    assert total == pytest.approx(550.0)
    assert a_j + b_j + 10.0 * (2 * 15 - 9.5 - 10.5) / 2 == pytest.approx(total)  # the unused floor: 50 J


def test_a_meters_floor_is_the_lowest_mean_power_between_samples_in_the_window():
    sampler = replayed(TraceSource([0.0, 1.0, 2.0, 3.0, 4.0], [40.0, 20.0, 30.0, 10.0, 50.0], name="rapl"))
    assert idle_floor_w(sampler, sampler.window(0.0, 4.0)) == pytest.approx(20.0)  # (30 + 10) / 2 over [2, 3]
    assert idle_floor_w(sampler, sampler.window(0.0, 2.0)) == pytest.approx(25.0)  # (20 + 30) / 2 over [1, 2]
    assert idle_floor_w(sampler, sampler.window(0.5, 1.5)) == 0.0  # one sample inside: no interval


def test_generation_and_label_energy_on_a_known_trace():
    outs = [
        JobOutcome(key="g", worker="w", generation=generation(0.5, 4.5, 50)),
        JobOutcome(key="l", worker="w", label=label_pass(1.0, 3.0, 1000)),
        JobOutcome(key="r", worker="w", reference=ReferenceRecord("p", (1,), (2,), "x", 0.1)),
        JobOutcome(key="e", worker="w", error="boom"),
    ]
    g, lab, ref, err = attach_energy(outs, replayed(trace()))
    # [0.5, 4.5]: 7.5 + 20 + 40 + 60 + 26.25 J (trapezoids, edges interpolated) for 50 tokens
    e = g.generation.energy
    assert e.energy_j == pytest.approx(153.75) and e.mean_power_w == pytest.approx(153.75 / 4.0)
    assert e.j_per_100_tokens == pytest.approx(307.5) and e.tokens_per_j == pytest.approx(50 / 153.75)
    assert e.power_source == "nvml" and e.power_measured is True
    assert g.generation.tokens == outs[0].generation.tokens and g.key == "g"  # the rest of the record kept
    # [1, 3]: 20 + 40 J for 1000 labelled tokens
    e = lab.label.energy
    assert e.energy_j == pytest.approx(60.0) and e.mean_power_w == pytest.approx(30.0)
    assert e.j_per_100_tokens == pytest.approx(6.0) and e.tokens_per_j == pytest.approx(1000 / 60.0)
    assert lab.label.n_tokens == 1000 and lab.generation is None
    assert ref == outs[2] and err == outs[3]  # nothing to measure: passed through unchanged


def test_label_passes_and_generations_run_one_at_a_time_so_their_joules_add_up_to_the_trace():
    # the accelerator worker runs one job at a time: back-to-back windows split the trace with nothing counted twice
    outs = [
        JobOutcome(key="l1", worker="w", label=label_pass(0.25, 1.5, 400)),
        JobOutcome(key="g", worker="w", generation=generation(1.5, 2.5, 8)),
        JobOutcome(key="l2", worker="w", label=label_pass(2.5, 5.75, 900)),
    ]
    l1, g, l2 = attach_energy(outs, replayed(trace()))
    parts = [l1.label.energy.energy_j, g.generation.energy.energy_j, l2.label.energy.energy_j]
    # [0.25, 1.5]: 5 -> 20 W over 0.75 s, then 20 W for 0.5 s; [1.5, 2.5]: 20 W for 0.5 s, then 20 -> 40 W;
    # [2.5, 5.75]: 40 -> 60 W over 0.5 s, 60 W, 60 -> 30 W, then 30 W for 0.75 s
    assert parts == pytest.approx([9.375 + 10.0, 10.0 + 15.0, 25.0 + 60.0 + 45.0 + 22.5])
    assert sum(parts) == pytest.approx(replayed(trace()).window(0.25, 5.75).energy_j)


def test_an_energy_record_without_tokens_has_no_per_token_figures():
    win = replayed(trace()).window(1.0, 2.0)
    e = energy_record(win, 0)
    assert e.energy_j == pytest.approx(20.0) and e.j_per_100_tokens is None and e.tokens_per_j == 0.0
    assert e.mean_power_w == pytest.approx(20.0) and e.power_source == "nvml" and e.power_measured is True


def test_small_windows_and_machines_count_too():
    assert cpu_share(0.25, 0.5) == 0.5  # under one busy CPU second
    # 0.25 s on 2 CPUs (0.5 CPU s of capacity, all used): the whole 5 J floor and the 5 J above it
    assert attributed_energy_j(10.0, 0.25, own_cpu_s=0.5, machine_cpu_s=0.5, idle_w=20.0, n_cpus=2) == 10.0


def test_the_floor_of_an_unmeasured_source_without_a_model_is_zero():
    sampler = replayed(TraceSource([0.0, 1.0], [7.0, 7.0], name="estimate", measured=False))
    assert idle_floor_w(sampler, sampler.window(0.0, 1.0)) == 0.0


def test_a_meters_floor_reads_only_the_windows_sources_and_its_first_interval():
    a = TraceSource([0.0, 2.0, 4.0], [10.0, 30.0, 10.0], name="a")
    b = TraceSource([1.0, 3.0], [50.0, 50.0], name="b")  # another meter, sampled in between
    est = TraceSource([1.0], [99.0], name="estimate", measured=False)
    sampler = replayed(a, b, est)
    # a alone: 20 W mean over [0, 2] and [2, 4]; b's or the estimate's instants would split them into 15 and 25
    assert idle_floor_w(sampler, sampler.window(0.0, 4.0, only=["a"])) == pytest.approx(20.0)
    sampler = replayed(TraceSource([0.0, 2.0, 4.0], [10.0, 10.0, 50.0], name="a"))
    assert idle_floor_w(sampler, sampler.window(0.0, 4.0)) == pytest.approx(10.0)  # [0, 2], from the window's start


def test_training_energy_takes_this_machines_cpus_unless_told(monkeypatch):
    sampler = replayed(linear_model_trace([1] * 16, measured=False))
    win = sampler.window(0.0, 10.0)  # 300 J: 100 J floor + 20 W x 10 CPU s
    here = psutil.cpu_count() or 1
    assert training_energy_j(sampler, win, 10.0, 10.0) == pytest.approx(100.0 * min(1.0, 10.0 / (here * 10)) + 200.0)
    assert training_energy_j(sampler, win, 10.0, 10.0, n_cpus=7) == pytest.approx(100.0 / 7 + 200.0)
    monkeypatch.setattr(psutil, "cpu_count", lambda: None)  # psutil cannot tell: one CPU
    assert training_energy_j(sampler, win, 10.0, 10.0) == pytest.approx(300.0)
