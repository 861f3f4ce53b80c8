"""The accelerator worker's cost model job: a CostModelJob gives a CostModelRecord of the runner's own verifier, and
its measurement window gets its energy from the power trace as a generation's does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.workers.accelerator.test_runner import PROMPT, runner  # noqa: F401 (the module's tiny-Mistral runner fixture)
from tests.workers.power.power_trace import replayed, trace
from workers.contracts import CostModelJob, JobOutcome
from workers.decoding.costmodel import RoundCosts


def test_a_cost_model_job_measures_the_runners_verifier(runner):  # noqa: F811
    job = CostModelJob(
        key="cost", prompt=PROMPT, max_context=24, max_n=3, regimes=("cached",), repeats=1, budget_s=None
    )
    out = runner.run(job)
    assert out.ok and out.key == "cost" and out.generation is None
    r = out.cost_model
    table = RoundCosts.from_json(r.costs)
    assert r.device == table.device == "cpu" and r.verifier.endswith("float32")
    assert table.widths("cached", "chain") == [0, 2, 3] and table.widths("cached", "first") == [0]
    assert {s[0] for s in r.samples} == {"cached"} and all(s[4] > 0 for s in r.samples)
    assert 0 < r.measure_s <= r.ended_at - r.started_at + 1e-3
    assert table.wall_seconds("cached", [(20, 0, 1), (3, 20, 3)]) > 0


def test_a_cost_model_measurement_gets_its_windows_energy(runner):  # noqa: F811
    record = runner.run(
        CostModelJob(key="c", prompt=PROMPT, max_context=12, max_n=1, regimes=("uncached",), repeats=1)
    ).cost_model
    own = runner.sampler
    runner.sampler = replayed(trace())
    try:
        [out] = runner.attach_energy(
            [JobOutcome(key="c", worker="w", cost_model=replace(record, started_at=2.25, ended_at=2.75))]
        )
    finally:
        runner.sampler = own
    assert out.cost_model.energy.energy_j == pytest.approx(20.0)  # 30 -> 50 W over 0.5 s
    assert out.cost_model.energy.mean_power_w == pytest.approx(40.0)
