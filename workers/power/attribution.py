"""Whose joules: a generation's or label pass's window, and a training's share of the machine it shared.

A generation or a label pass runs alone on the accelerator worker (one job at a time), so it is given the whole
energy of its [started_at, ended_at] window (`workers.contracts.attach_energy`). A training shares the machine with other
trainings (and with the sweep, under `overlap`), over windows that overlap partly or not at all, so it is given a
share (`attributed_energy_j`) of its window's energy E over wall time T, split in two:

- the idle floor P0 x T (what the machine draws doing nothing) is charged per CPU second of capacity: a training
  that used c CPU seconds on n CPUs pays P0 x c / n, so trainings whose busy times do not overlap inside
  overlapping windows never pay the same idle second twice (sum(c) <= n x T over any span);
- the rest, E - P0 x T, is shared by CPU time: c / (the machine's busy CPU seconds over the window), clipped to 1.

Where the power above the floor follows busy CPU time (the estimate's model exactly: P0 + (TDP - P0) x busy
share), each training gets exactly P0 x c / n + (TDP - P0) x c / n, and the shares of any set of trainings add up to
at most the energy measured over the union of their windows. P0 is the estimate's modelled floor, or for a meter the
lowest mean power between two samples inside the window: an upper bound on the true floor (the machine was at
least that busy), which moves joules from the CPU-time share to the per-capacity charge.

Example:
    >>> attributed_energy_j(400.0, 10.0, own_cpu_s=10.0, machine_cpu_s=15.0, idle_w=10.0, n_cpus=2)
    250.0
"""

from __future__ import annotations

import psutil

from workers.power.base import EnergyWindow
from workers.power.sampler import PowerSampler

ATTRIBUTION = "idle per CPU capacity + CPU-time share"  # stored beside a training's energy (energy_attribution)


def cpu_share(own_cpu_s: float, machine_cpu_s: float) -> float:
    """own / machine busy CPU seconds, clipped to [0, 1]; 1 when the machine counted no busy time (nobody else)."""
    if machine_cpu_s <= 0:
        return 1.0
    return min(1.0, max(0.0, own_cpu_s / machine_cpu_s))


def attributed_energy_j(
    window_energy_j: float | None, wall_s: float, own_cpu_s: float, machine_cpu_s: float, idle_w: float, n_cpus: int
) -> float | None:
    """A training's joules of its window: the idle floor per CPU second of capacity + its CPU-time share of the rest.

    `idle_w` x `wall_s` is capped at the window's energy (a floor above what was measured counts as all of it).
    """
    if window_energy_j is None:
        return None
    idle_j = min(idle_w * wall_s, window_energy_j)
    capacity = n_cpus * wall_s  # CPU seconds the machine could have given over the window
    own_idle_j = idle_j * min(1.0, own_cpu_s / capacity) if capacity > 0 else 0.0
    return own_idle_j + (window_energy_j - idle_j) * cpu_share(own_cpu_s, machine_cpu_s)


def idle_floor_w(sampler: PowerSampler, window: EnergyWindow) -> float:
    """The idle floor behind a window: the estimate's modelled floor, else the lowest mean power between two
    consecutive samples of the window's sources inside it (0 when fewer than two samples lie inside)."""
    if not window.measured:
        return sum(float(getattr(s, "idle_w", 0.0)) for s in sampler.sources if s.name in window.sources)
    times = sorted(
        {s.t_s for name in window.sources for s in sampler.samples(name) if window.t0_s <= s.t_s <= window.t1_s}
    )
    means = [sampler.window(a, b, only=window.sources).mean_power_w for a, b in zip(times, times[1:]) if b > a]
    return min(means, default=0.0)


def training_energy_j(
    sampler: PowerSampler, window: EnergyWindow, own_cpu_s: float, machine_cpu_s: float, n_cpus: int | None = None
) -> float:
    """`attributed_energy_j` of a training measured by `sampler` over `window` (the floor from `idle_floor_w`)."""
    return attributed_energy_j(
        window.energy_j,
        window.wall_s,
        own_cpu_s,
        machine_cpu_s,
        idle_floor_w(sampler, window),
        n_cpus or psutil.cpu_count() or 1,
    )
