"""storage.costs and store_cost_model: a measured cost model round-trips through a real SQLite file (migrated), and
the prediction error per regime matches hand-worked pairs of timed and replayed generations."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from storage import store
from storage.cell_spec import CellParams, CellSpec
from storage.costs import (
    fit_frame,
    load_cost_model,
    prediction_error,
    prediction_pairs,
    regime_power_w,
    stored_cost_model,
    surface_frame,
)
from storage.db import open_db
from tests.storage.test_store import gen
from workers.contracts import CostModelRecord, EnergyRecord
from workers.costmodel import PassCostModel

COEF = {"intercept": 0.03, "fed": 0.001, "kept": 0.0004, "attention": 1e-6, "cached": 0.0}
SAMPLES = ((76, 0, 1, 0.138), (1, 76, 1, 0.037), (4, 76, 4, 0.041))


@pytest.fixture
def session(tmp_path):
    _, Session = open_db(f"sqlite:///{tmp_path / 'costs.db'}")
    with Session() as s:
        yield s


def record(coef=COEF, power_w=12.5) -> CostModelRecord:
    energy = EnergyRecord(power_w * 20.0, power_w, "estimate", False, None, None)
    return CostModelRecord("smollm2-135m:torch.float32", "cpu", coef, SAMPLES, 20.0, 100.0, 120.0, energy)


def cell_id(session, exp_id: int, spec: CellSpec) -> int:
    store.add_cells(session, exp_id, [spec])
    return next(c.id for c in store.pending_cells(session, exp_id, (spec.kind,)) if c.key == spec.key)


def test_a_cost_model_round_trips(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    other = store.upsert_experiment(session, "f", "spec", "h2", None)
    assert load_cost_model(session, exp.id) is None
    store.store_cost_model(session, cell_id(session, exp.id, CellSpec(key="c1", kind="cost_model")), record())
    session.commit()
    model = load_cost_model(session, exp.id)
    assert model == PassCostModel("smollm2-135m:torch.float32", "cpu", COEF)
    assert model.pass_seconds(76, 0, 1) == pytest.approx(0.03 + 0.076 + 0.0004 + 76 * 76 * 1e-6)
    stored = stored_cost_model(session, exp.id)
    assert stored.samples == SAMPLES and stored.measure_s == 20.0
    assert (stored.energy_j, stored.mean_power_w, stored.power_source) == (250.0, 12.5, "estimate")
    newer = dict(COEF, intercept=0.05)
    store.store_cost_model(session, cell_id(session, exp.id, CellSpec(key="c2", kind="cost_model")), record(newer))
    session.commit()
    assert load_cost_model(session, exp.id).coefficients["intercept"] == 0.05  # the newest one
    assert load_cost_model(session, exp.id, device="cuda") is None
    assert load_cost_model(session, other.id) is None


# (strategy, k, prompt, timed wall s, replay predicted wall s); 4 tokens each
CACHED = [
    ("plain", 0, 0, 1.0, 1.0),
    ("plain", 0, 1, 1.0, 0.8),  # predicted 5 tokens/s, measured 4: error 0.25
    ("ngram", 3, 0, 0.5, 0.5),
    ("ngram", 3, 1, 0.5, 0.4),  # 0.25
    ("lookup", 3, 0, 0.8, 1.0),  # predicted 4 tokens/s, measured 5: 0.2
    ("lookup", 3, 1, 0.8, 0.8),
    ("suffix", 3, 0, 0.6, 0.3),  # 1.0
    ("suffix", 3, 1, 0.6, 0.3),  # 1.0
]


def add_generation(session, exp_id: int, strategy, k, regime, prompt, measure, wall_s, predicted=None, key=None):
    spec = CellSpec(
        key=f"{strategy}-{k}-{regime}-{prompt}-{measure}-{key}",
        kind="sweep",
        strategy=strategy,
        draft=strategy,
        task="q",
        prompt_index=prompt,
        k=k,
        regime=regime,
        params=CellParams(prompt="p", reference=key or f"r{prompt}"),
    )
    g = replace(gen(tokens=(1, 2, 3, 4)), wall_s=wall_s, measure=measure, predicted_wall_s=predicted)
    store.store_generation(session, cell_id(session, exp_id, spec), g)


@pytest.fixture
def validated(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    for strategy, k, prompt, timed_s, replay_s in CACHED:
        add_generation(session, exp.id, strategy, k, "cached", prompt, "timed", timed_s)
        add_generation(session, exp.id, strategy, k, "cached", prompt, "replay", replay_s, predicted=replay_s)
    # another data version's replay of the same coordinate and prompt: never paired with this version's timed row
    add_generation(session, exp.id, "ngram", 3, "cached", 0, "replay", 9.0, predicted=9.0, key="old")
    add_generation(session, exp.id, "ngram", 5, "cached", 0, "timed", 0.5)  # timed only: no pair
    # uncached: timed rows carrying their own prediction (error 1.0 and 0.2), no replay
    add_generation(session, exp.id, "plain", 0, "uncached", 0, "timed", 1.0, predicted=0.5)
    add_generation(session, exp.id, "plain", 0, "uncached", 1, "timed", 1.0, predicted=1.25)
    session.commit()
    return exp.id


def test_prediction_pairs_match_timed_with_replayed_of_the_same_version(session, validated):
    pairs = prediction_pairs(session, validated)
    assert len(pairs) == len(CACHED)
    assert set(pairs["prompt_key"]) == {"r0", "r1"}
    row = pairs[(pairs["strategy"] == "lookup") & (pairs["prompt_index"] == 0)].iloc[0]
    assert (row["measured_tokens_per_s"], row["predicted_tokens_per_s"]) == pytest.approx((5.0, 4.0))
    assert row["error"] == pytest.approx(0.2)


def test_prediction_error_by_hand(session, validated):
    table = prediction_error(session, validated).set_index("regime")
    cached = table.loc["cached"]
    assert cached["pairs"] == 8
    # errors 0, 0, 0, 0, 0.2, 0.25, 0.25, 1, 1 less one zero: median (0.2 + 0.25) / 2, p90 at rank 6.3 of 0..7
    assert cached["median_error"] == pytest.approx(0.225) and cached["p90_error"] == pytest.approx(1.0)
    # speedups over plain, timed: ngram 2.0, lookup 1.25, suffix 1.667; replayed: 2.0, 1.0, 3.0 (plain 8 / 1.8)
    # ranks 3, 1, 2 against 2, 1, 3: 1 - 6 * (1 + 0 + 1) / (3 * 8)
    assert cached["coordinates"] == 3 and cached["spearman"] == pytest.approx(0.5)
    assert cached["timed"] == 0 and math.isnan(cached["timed_median_error"])
    uncached = table.loc["uncached"]
    assert uncached["pairs"] == 0 and uncached["coordinates"] == 0 and math.isnan(uncached["spearman"])
    assert uncached["timed"] == 2
    assert uncached["timed_median_error"] == pytest.approx(0.6) and uncached["timed_p90_error"] == pytest.approx(0.92)


def test_prediction_error_of_an_experiment_without_generations_is_empty(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    assert prediction_error(session, exp.id).empty and prediction_pairs(session, exp.id).empty


def test_regime_power_is_the_timed_generations_joules_over_seconds(session, validated):
    # cached: 9 timed rows of 2 J over 2 x (1 + 0.5 + 0.8 + 0.6) + 0.5 s; uncached: 2 x 2 J over 2 s; replays left out
    assert regime_power_w(session, validated) == pytest.approx({"cached": 18 / 6.3, "uncached": 2.0})


def test_fit_and_surface_frames_follow_the_stored_samples(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    store.store_cost_model(session, cell_id(session, exp.id, CellSpec(key="c", kind="cost_model")), record())
    stored = stored_cost_model(session, exp.id)
    fit = fit_frame(stored)
    assert list(zip(fit["fed"], fit["cached"], fit["kept"])) == [(76, 0, 1), (1, 76, 1), (4, 76, 4)]
    assert fit.loc[0, "measured_ms"] == pytest.approx(138.0)
    assert fit.loc[0, "error"] == pytest.approx(abs(stored.model.pass_seconds(76, 0, 1) / 0.138 - 1))
    surface = surface_frame(stored)
    assert set(surface["passes"]) == {"no cache (uncached or prefill)", "after 76 cached"}
    assert sorted(surface[surface["passes"] == "after 76 cached"]["fed"]) == [1, 2, 3, 4]
