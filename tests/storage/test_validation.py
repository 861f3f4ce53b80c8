"""storage.validation and store_cost_model: a measured round-cost table round-trips through a real SQLite file (migrated),
and the prediction error per regime and width band, its bias, the run's own timing noise and the Spearman of speedups
match hand-worked pairs of timed and replayed generations."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import pandas as pd
import pytest
from click.testing import CliRunner

import greenspec
from orchestrator.cli import main
from storage import store
from storage.cell_spec import CellParams, CellSpec
from storage.db import open_db
from storage.validation import (
    curve_frame,
    load_cost_model,
    prediction_error,
    prediction_pairs,
    regime_power_w,
    stored_cost_model,
    table_frame,
    table_pace,
    width_band,
)
from tests.storage.test_store import gen
from workers.contracts import CostModelRecord, EnergyRecord
from workers.decoding.costmodel import RoundCosts, build_table

SAMPLES = (
    ("cached", "first", 0, 76, 0.138),
    ("cached", "chain", 0, 76, 0.037),
    ("cached", "chain", 0, 76, 0.039),
    ("cached", "chain", 4, 76, 0.041),
    ("cached", "chain", 4, 150, 0.040),  # faster at a longer context: the table pools the two
)
TABLE = build_table("smollm2-135m:torch.float32", "cpu", SAMPLES, {"threads": 2})


@pytest.fixture
def session(tmp_path):
    _, Session = open_db(f"sqlite:///{tmp_path / 'costs.db'}")
    with Session() as s:
        yield s


def record(table: RoundCosts = TABLE, power_w=12.5) -> CostModelRecord:
    energy = EnergyRecord(power_w * 20.0, power_w, "estimate", False, None, None)
    return CostModelRecord(table.verifier, table.device, table.to_json(), SAMPLES, 20.0, 100.0, 120.0, energy)


def cell_id(session, exp_id: int, spec: CellSpec) -> int:
    store.add_cells(session, exp_id, [spec])
    return next(c.id for c in store.pending_cells(session, exp_id, (spec.kind,)) if c.key == spec.key)


def test_a_cost_model_round_trips(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    other = store.upsert_experiment(session, "f", "spec", "h2", None)
    assert load_cost_model(session, exp.id) is None
    store.store_cost_model(session, cell_id(session, exp.id, CellSpec(key="c1", kind="cost_model")), record())
    session.commit()
    table = load_cost_model(session, exp.id)
    assert table == TABLE and table.rows["cached/chain/0"] == ((76, 0.038),)
    assert table.seconds("cached", "chain", 4, 100) == pytest.approx(0.0405)  # (0.041 + 0.040) / 2, pooled
    stored = stored_cost_model(session, exp.id)
    assert stored.samples == SAMPLES and stored.measure_s == 20.0
    assert (stored.energy_j, stored.mean_power_w, stored.power_source) == (250.0, 12.5, "estimate")
    newer = replace(TABLE, meta={"threads": 1})
    store.store_cost_model(session, cell_id(session, exp.id, CellSpec(key="c2", kind="cost_model")), record(newer))
    session.commit()
    assert load_cost_model(session, exp.id).meta == {"threads": 1}  # the newest one
    assert load_cost_model(session, exp.id, device="cuda") is None
    assert load_cost_model(session, other.id) is None


def test_width_bands():
    got = [width_band(s, k) for s, k in [("plain", 0), ("ngram", 1), ("ngram", 4), ("ngram", 5), ("d-tree", 5)]]
    assert got + [width_band("h-auto", 8)] == ["plain", "k = 1", "k 2-4", "k 5+", "tree", "auto"]


# (strategy, k, prompt, timed wall s, replay predicted wall s); 4 tokens each
CACHED = [
    ("plain", 0, 0, 1.0, 1.0),
    ("plain", 0, 1, 1.0, 0.8),  # predicted 5 tokens/s, measured 4: error 0.25
    ("plain", 0, 2, 1.0, 1.0),
    ("ngram", 3, 0, 0.5, 0.5),
    ("ngram", 3, 1, 0.5, 0.4),  # 0.25
    ("ngram", 3, 2, 0.5, 0.5),
    ("lookup", 3, 0, 0.8, 1.0),  # predicted 4 tokens/s, measured 5: -0.2
    ("lookup", 3, 1, 0.8, 0.8),
    ("lookup", 3, 2, 0.8, 0.8),
    ("suffix", 3, 0, 0.6, 0.3),  # 1.0
    ("suffix", 3, 1, 0.6, 0.3),  # 1.0
    ("suffix", 3, 2, 0.6, 0.3),  # 1.0
]
RUNS = {("plain", 0): (1.0, 1.1), ("ngram", 0): (0.5, 0.6)}  # timed twice: noise 0.1 / sqrt 2 and 0.2 / sqrt 2


def add_generation(
    session, exp_id: int, strategy, k, regime, prompt, measure, wall_s, predicted=None, key=None, runs=None, pace=None
):
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
    g = gen(tokens=(1, 2, 3, 4)).replaced(wall_s=wall_s, measure=measure, predicted_wall_s=predicted)
    g = replace(g, wall_s_runs=runs) if runs else g
    g = replace(g, pace_s=pace)
    store.store_generation(session, cell_id(session, exp_id, spec), g)


@pytest.fixture
def validated(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    for strategy, k, prompt, timed_s, replay_s in CACHED:
        runs = RUNS.get((strategy, prompt))
        add_generation(session, exp.id, strategy, k, "cached", prompt, "timed", timed_s, runs=runs)
        add_generation(session, exp.id, strategy, k, "cached", prompt, "replay", replay_s, predicted=replay_s)
    # another data version's replay of the same coordinate and prompt: never paired with this version's timed row
    add_generation(session, exp.id, "ngram", 3, "cached", 0, "replay", 9.0, predicted=9.0, key="old")
    add_generation(session, exp.id, "ngram", 5, "cached", 0, "timed", 0.5)  # timed only: no pair
    # uncached: timed only, one of them twice (noise 0.3 / sqrt 2), no replay
    add_generation(session, exp.id, "plain", 0, "uncached", 0, "timed", 1.0, runs=(1.0, 1.3))
    add_generation(session, exp.id, "plain", 0, "uncached", 1, "timed", 1.0)
    session.commit()
    return exp.id


def test_prediction_pairs_match_timed_with_replayed_of_the_same_version(session, validated):
    pairs = prediction_pairs(session, validated)
    assert len(pairs) == len(CACHED)
    assert set(pairs["prompt_key"]) == {"r0", "r1", "r2"}
    row = pairs[(pairs["strategy"] == "lookup") & (pairs["prompt_index"] == 0)].iloc[0]
    assert (row["measured_tokens_per_s"], row["predicted_tokens_per_s"]) == pytest.approx((5.0, 4.0))
    assert row["bias"] == pytest.approx(-0.2) and row["error"] == pytest.approx(0.2) and row["band"] == "k 2-4"


def test_prediction_error_by_hand(session, validated):
    table = prediction_error(session, validated).set_index(["regime", "band"])
    cached = table.loc[("cached", "all")]
    assert cached["pairs"] == 12
    # errors: six 0, 0.2, 0.25, 0.25, 1, 1, 1: median (0 + 0.2) / 2; p90 at rank 9.9 of 0..11; signed: median 0
    assert cached["median_error"] == pytest.approx(0.1) and cached["p90_error"] == pytest.approx(1.0)
    assert cached["bias"] == pytest.approx(0.0)
    assert cached["noise"] == pytest.approx(0.15 / math.sqrt(2)) and cached["noise_pairs"] == 2
    # speedups over plain, timed: ngram 2.0, lookup 1.25, suffix 1.667; replayed: 2.0, 1.077, 3.111 (plain 12 / 2.8)
    # ranks 3, 1, 2 against 2, 1, 3: 1 - 6 * (1 + 0 + 1) / (3 * 8)
    assert cached["coordinates"] == 3 and cached["spearman"] == pytest.approx(0.5)
    # own error sqrt(max(0, 0.1^2 - 0.106^2)) = 0, bias 0, but 2 generations timed twice are too few to tell
    assert cached["within_noise"] == "unresolved"
    band = table.loc[("cached", "k 2-4")]  # 0, 0.25, 0, -0.2, 0, 0, 1, 1, 1
    assert band["pairs"] == 9 and band["median_error"] == pytest.approx(0.2) and band["bias"] == pytest.approx(0.0)
    assert band["noise"] == pytest.approx(0.2 / math.sqrt(2)) and math.isnan(band["spearman"])
    plain = table.loc[("cached", "plain")]
    assert plain["pairs"] == 3 and plain["bias"] == pytest.approx(0.0) and plain["noise_pairs"] == 1
    uncached = table.loc[("uncached", "all")]
    assert uncached["pairs"] == 0 and uncached["coordinates"] == 0 and math.isnan(uncached["spearman"])
    assert uncached["noise"] == pytest.approx(0.3 / math.sqrt(2)) and math.isnan(uncached["median_error"])
    assert pd.isna(uncached["within_noise"])  # no pair to judge


def test_a_re_prediction_is_validated_against_another_runs_timed_generations(session, validated):
    """`timed_from`: the replayed rows are the experiment's, the timed rows (and the noise) the other run's, matched
    by coordinate and prompt key; the experiment's own timed rows are never used."""
    other = store.upsert_experiment(session, "on-target", "spec", "h2", None).id
    for strategy, k, prompt, timed_s, _ in CACHED:  # the same prompts timed again, every one 2x slower
        add_generation(session, other, strategy, k, "cached", prompt, "timed", 2 * timed_s)
    add_generation(session, other, "plain", 0, "cached", 5, "timed", 1.0, runs=(1.0, 1.2))  # no replayed twin
    session.commit()
    pairs = prediction_pairs(session, validated, timed_from=other)
    own = prediction_pairs(session, validated)
    assert len(pairs) == len(own) == len(CACHED)
    merged = own.merge(pairs, on=["strategy", "k", "regime", "prompt_index", "prompt_key"], suffixes=("", "_other"))
    assert list(merged["predicted_tokens_per_s_other"]) == pytest.approx(list(merged["predicted_tokens_per_s"]))
    assert list(merged["measured_tokens_per_s_other"]) == pytest.approx(list(merged["measured_tokens_per_s"] / 2))
    table = prediction_error(session, validated, timed_from=other).set_index(["regime", "band"])
    cached = table.loc[("cached", "all")]
    assert cached["pairs"] == len(CACHED) and cached["noise_pairs"] == 1
    assert cached["noise"] == pytest.approx(0.2 / math.sqrt(2))  # the other run's generation timed twice
    assert ("uncached", "all") not in table.index  # the experiment's own timed-only uncached rows are not read


def test_the_machines_drift_is_measured_beside_the_error(session):
    """The table's pace 0.010 s; the timings made while the machine ran 10% slower (pace 0.011) and then at the table's
    pace. As timed, the slow spell's predictions are 10% too fast (the error); set at the table's pace they are exact
    (`paced_error` 0), and `drift` says how far the machine moved. The pace is the median of PACE_WINDOW timings
    around each in run order, so one stray pace (0.030, in the middle of the slow spell) moves nothing."""
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    table = replace(TABLE, meta={"threads": 2, "pace_s": 0.010})
    store.store_cost_model(session, cell_id(session, exp.id, CellSpec(key="c", kind="cost_model")), record(table))
    paces = [0.011] * 4 + [0.030] + [0.011] * 4 + [0.010] * 9
    rows = [(s, k, p) for s, k in [("plain", 0), ("ngram", 3)] for p in range(9)]
    for (strategy, k, prompt), pace in zip(rows, paces):
        slow = 1.1 if pace > 0.0105 else 1.0
        add_generation(session, exp.id, strategy, k, "cached", prompt, "timed", slow, pace=pace)
        add_generation(session, exp.id, strategy, k, "cached", prompt, "replay", 1.0, predicted=1.0)
    session.commit()
    pairs = prediction_pairs(session, exp.id).sort_values(["strategy", "prompt_index"], ascending=[False, True])
    assert list(pairs["pace"]) == pytest.approx([1.1] * 9 + [1.0] * 9)  # plain's timings first: the slow spell
    assert list(pairs["bias"]) == pytest.approx([0.1] * 9 + [0.0] * 9)  # too fast as timed
    assert list(pairs["paced_bias"]) == pytest.approx([0.0] * 18)
    table = prediction_error(session, exp.id).set_index(["regime", "band"])
    row = table.loc[("cached", "all")]
    assert row["median_error"] == pytest.approx(0.05) and row["paced_error"] == pytest.approx(0.0)
    assert row["drift"] == pytest.approx(0.05)  # median |pace - 1|: 9 of 18 at 1.1, 9 at 1.0
    assert table.loc[("cached", "plain"), "drift"] == pytest.approx(0.1)


def test_a_re_prediction_is_paced_by_its_own_table_only_where_it_was_measured_alike(session):
    """Timings of another run are set at the predicting table's pace when both tables were measured on the same
    processor, dtype and threads; else at their own run's table's pace (a table at 2 threads is not a pace at 1)."""
    exp, other = (store.upsert_experiment(session, n, "spec", n, None).id for n in ("derived", "timed"))
    meta = {"device_name": "Xeon", "dtype": "float32", "threads": 1}
    for key, exp_id, pace in (("a", exp, 0.010), ("b", other, 0.012)):
        table = replace(TABLE, meta=meta | {"pace_s": pace})
        store.store_cost_model(session, cell_id(session, exp_id, CellSpec(key=key, kind="cost_model")), record(table))
    session.commit()
    assert table_pace(session, exp, other) == 0.010 and table_pace(session, other) == 0.012
    table = replace(TABLE, meta=meta | {"threads": 2, "pace_s": 0.006})
    store.store_cost_model(session, cell_id(session, exp, CellSpec(key="c", kind="cost_model")), record(table))
    session.commit()
    assert table_pace(session, exp, other) == 0.012 and table_pace(session, exp) == 0.006


def test_two_timed_prompts_rank_nothing(session):
    """A coordinate enters the Spearman of speedups only with at least three timed prompts."""
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    for strategy, k, prompt, timed_s, replay_s in CACHED:
        if prompt < 2:
            add_generation(session, exp.id, strategy, k, "cached", prompt, "timed", timed_s)
            add_generation(session, exp.id, strategy, k, "cached", prompt, "replay", replay_s, predicted=replay_s)
    session.commit()
    row = prediction_error(session, exp.id).set_index(["regime", "band"]).loc[("cached", "all")]
    assert row["pairs"] == 8 and row["coordinates"] == 0 and math.isnan(row["spearman"])


def test_prediction_error_of_an_experiment_without_generations_is_empty(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    assert prediction_error(session, exp.id).empty and prediction_pairs(session, exp.id).empty


def test_regime_power_is_the_timed_generations_joules_over_seconds(session, validated):
    # cached: 13 timed rows of 2 J over 3 x (1 + 0.5 + 0.8 + 0.6) + 0.5 s; uncached: 2 x 2 J over 2 s; replays left out
    assert regime_power_w(session, validated) == pytest.approx({"cached": 26 / 9.2, "uncached": 2.0})


def test_table_and_curve_frames_follow_the_stored_rounds(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    store.store_cost_model(session, cell_id(session, exp.id, CellSpec(key="c", kind="cost_model")), record())
    stored = stored_cost_model(session, exp.id)
    frame = table_frame(stored).set_index(["regime", "kind", "n", "context"])
    row = frame.loc[("cached", "chain", 0, 76)]
    assert row["rounds"] == 2 and row["median_ms"] == pytest.approx(38.0) and row["table_ms"] == pytest.approx(38.0)
    assert (row["min_ms"], row["max_ms"]) == pytest.approx((37.0, 39.0))
    assert frame.loc[("cached", "chain", 4, 150), "table_ms"] == pytest.approx(40.5)  # pooled with 76's 41
    curve = curve_frame(stored.table, 76, max_len=4).set_index("n")
    assert list(curve["regime"].unique()) == ["cached"]
    # n = 0, 1: one token fed (38 ms); 2, 3 interpolated between 0 and 4 (40.5 ms at 76: pooled)
    assert curve["round_ms"].tolist() == pytest.approx([38.0, 38.0, 39.25, 39.875, 40.5])
    assert math.isnan(curve.loc[0, "break_even"]) or curve.loc[0, "break_even"] is None


def test_the_validation_table_exports_and_reads_through_the_library(session, validated):
    url = str(session.get_bind().url)
    res = CliRunner().invoke(main, ["--db", url, "export", "--validation", "--format", "csv"])
    assert res.exit_code == 0, res.output
    exported = pd.read_csv(io.StringIO(res.stdout)).set_index(["regime", "band"])
    library = greenspec.open_results(url).validation("e").set_index(["regime", "band"])
    assert exported.loc[("cached", "all"), "pairs"] == library.loc[("cached", "all"), "pairs"] == 12
    assert exported.loc[("cached", "k 2-4"), "median_error"] == pytest.approx(0.2)
    refused = CliRunner().invoke(main, ["--db", url, "export", "--validation", "--generations"])
    assert refused.exit_code != 0 and "--generations does not apply" in refused.output


def test_a_validation_against_another_run_through_the_cli_and_the_library(session, validated):
    other = store.upsert_experiment(session, "on-target", "spec", "h2", None).id
    for strategy, k, prompt, timed_s, _ in CACHED:
        add_generation(session, other, strategy, k, "cached", prompt, "timed", 2 * timed_s)
    session.commit()
    url = str(session.get_bind().url)
    args = ["--db", url, "export", "-e", "e", "--validation", "--timed-in", "on-target", "--format", "csv"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    exported = pd.read_csv(io.StringIO(res.stdout)).set_index(["regime", "band"])
    library = greenspec.open_results(url).validation("e", timed_in="on-target").set_index(["regime", "band"])
    expected = prediction_error(session, validated, timed_from=other).set_index(["regime", "band"])
    for frame in (exported, library):
        assert frame.loc[("cached", "all"), "median_error"] == pytest.approx(
            expected.loc[("cached", "all"), "median_error"]
        )
    alone = CliRunner().invoke(main, ["--db", url, "export", "--timed-in", "on-target"])
    assert alone.exit_code != 0 and "add --validation" in alone.output
    missing = CliRunner().invoke(main, ["--db", url, "export", "--validation", "--timed-in", "nope"])
    assert missing.exit_code != 0 and "nope" in missing.output
    with pytest.raises(greenspec.NoResults, match="nope"):
        greenspec.open_results(url).validation("e", timed_in="nope")
