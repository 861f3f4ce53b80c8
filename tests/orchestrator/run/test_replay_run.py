"""Replay as a scheduled workload, end to end on a real local Ray and the tiny verifier: every greedy cell replayed
on CPU workers from its prompt's reference, the first prompt also timed, the cost model measured on the accelerator
worker (and again by the worker that times the cells, in two turns among them, whose table then predicts every
replay) and stored with the experiment; timed and replayed twins make identical rounds; a resume re-runs nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from orchestrator.run.dispatcher import Dispatcher
from orchestrator.run.driver import RunOptions, run_spec_file
from orchestrator.run.options import NoProgress
from orchestrator.run.spec import parse_spec
from storage.db import open_db
from storage.models import Cell, CostModel, Generation
from storage.validation import stored_cost_model
from tests.orchestrator.conftest import MAX_NEW_TOKENS
from workers.decoding.costmodel import RoundCosts, predict_generation, table_rows

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]

REPLAY = {
    "warmup = false": "warmup = false\nreplay = true\ntimed_prompts = 1",
    "prompts = 2": "prompts = 3",
    '[[strategies]]\nname = "ngram"\ndraft = "ngram"\n': (
        '[[strategies]]\nname = "ngram"\ndraft = "ngram"\n'
        '[[strategies]]\nname = "olifant-auto"\ndraft = "olifant"\ncorpus = "pydoc"\nk = "auto"\n'
        '[[strategies]]\nname = "olifant-tree"\ndraft = "olifant"\ncorpus = "pydoc"\ntree = 6\n'
    ),
    "k = [2, 3]": "k = [3]",
}


@pytest.fixture(scope="module")
def replayed(tmp_path_factory, tiny_verifier, text_files):
    from tests.orchestrator.conftest import spec_writer

    folder = tmp_path_factory.mktemp("replay")
    o = RunOptions(db_url=f"sqlite:///{folder / 'g.db'}")
    spec = spec_writer(folder, tiny_verifier, text_files)(name="replay", **REPLAY)
    seen = []  # per batch of second timings: the timed generations and the timed cells left, as it was sent
    labels = []  # the second timings' labels, as the progress line shows them
    run_now = Dispatcher.run_now

    def watched(self, jobs, *args):
        with open_db(o.db_url, migrate=False)[1]() as s:
            timed = s.scalar(select(func.count()).where(Generation.measure == "timed"))
            left = s.scalar(select(func.count()).where(Cell.kind == "sweep", Cell.state != "done"))
        seen.append((len(jobs), timed, left))
        return run_now(self, jobs, *args)

    class Labels(NoProgress):
        def update(self, done, failed, label, stage=""):
            if stage == "second timings":
                labels.append(label)

    with pytest.MonkeyPatch.context() as mp:  # the accelerator worker is stopped for a replay phase of any size
        mp.setattr("orchestrator.run.loop.RELEASE_MIN_REPLAYS", 1)
        mp.setattr(Dispatcher, "run_now", watched)
        report = run_spec_file(spec, o, Labels())
    return o, report, spec, seen, labels


def rows(o, *columns):
    with open_db(o.db_url, migrate=False)[1]() as s:
        return s.execute(select(*columns)).all()


def test_every_greedy_cell_is_replayed_and_the_first_prompt_timed(replayed):
    o, report, *_ = replayed
    assert report.counts.get("failed", 0) == 0
    gens = rows(o, Generation.strategy, Generation.measure, Generation.prompt_index)
    replays = {(s, p) for s, m, p in gens if m == "replay"}
    timed = {(s, p) for s, m, p in gens if m == "timed"}
    strategies = {"plain", "ngram", "olifant-pydoc", "olifant-auto", "olifant-tree"}
    assert replays == {(s, p) for s in strategies for p in range(3)}
    assert timed == {(s, 0) for s in strategies}
    # per strategy x regime x prompt one replay: plain (k = 0) and each drafting strategy at its one k
    assert sum(m == "replay" for _, m, _ in gens) == len(strategies) * 2 * 3


def test_timed_and_replayed_twins_make_the_same_rounds(replayed):
    o, *_ = replayed
    found = rows(
        o,
        Generation.strategy,
        Generation.regime,
        Generation.prompt_index,
        Generation.measure,
        Generation.tokens_per_step,
        Generation.accepted_per_step,
        Generation.passes,
        Generation.tokens,
    )
    by = {(s, r, p, m): (tps, aps, passes, toks) for s, r, p, m, tps, aps, passes, toks in found}
    twins = [(key[:3]) for key in by if key[3] == "timed"]
    assert len(twins) == 10
    for s, r, p in twins:
        assert by[(s, r, p, "timed")] == by[(s, r, p, "replay")], (s, r, p)
    accepted = sum(sum(aps) for (s, *_), (_, aps, _, _) in by.items() if s != "plain")
    assert accepted > 0  # the drafts were right sometimes: the equality above covers accepted rounds
    assert all(sum(tps) == len(toks) <= MAX_NEW_TOKENS for tps, _, _, toks in by.values())


def test_the_table_measured_again_by_the_timing_worker_predicts_every_replay(replayed):
    o, *_ = replayed
    with open_db(o.db_url, migrate=False)[1]() as s:
        stmt = select(CostModel.costs, CostModel.samples, Cell.params, Cell.worker, Cell.finished_at)
        tables = s.execute(stmt.join(Cell, Cell.id == CostModel.cell_id).order_by(CostModel.id)).all()
        gens = s.execute(
            select(Generation.measure, Generation.regime, Generation.passes, Generation.draft_s, Generation.wall_s)
            .add_columns(Generation.predicted_wall_s, Cell.params)
            .join(Cell, Cell.id == Generation.cell_id)
        ).all()
    assert [(t.params.get("stage"), t.params.get("turn", 0)) for t in tables] == [
        (None, 0),
        ("timing", 0),
        ("timing", 1),
    ]
    sweeps = [(w, at) for k, w, at in rows(o, Cell.kind, Cell.worker, Cell.finished_at) if k == "sweep"]
    assert {t.worker for t in tables[1:]} == {w for w, _ in sweeps}  # measured where the cells were timed
    # each turn in the middle of its half of the timed cells: a quarter and three quarters through them
    n = len(sweeps)
    assert [sum(at < t.finished_at for _, at in sweeps) for t in tables[1:]] == [n // 4, 3 * n // 4] and n >= 4
    first, turn, again = (RoundCosts.from_json(t.costs) for t in tables)
    # the newest table is built from both turns' rounds (one repeat each)
    assert len(tables[2].samples) == 2 * len(tables[1].samples) and again.meta["turns"] == 2
    assert again.rows == table_rows([tuple(x) for x in tables[2].samples]) and again.rows != turn.rows
    moved = 0
    for g in gens:
        tree = bool(g.params.get("options", {}).get("tree"))
        predicted = predict_generation(again, g.regime, g.passes, g.draft_s, tree)
        assert g.predicted_wall_s == predicted
        if g.measure == "replay":
            assert g.wall_s == predicted
            moved += predicted != predict_generation(first, g.regime, g.passes, g.draft_s, tree)
    assert moved > 0  # the first table would have predicted otherwise: the replays were predicted again


def test_the_stored_table_reads_as_two_tables_the_second_in_two_turns(replayed):
    o, *_ = replayed
    with open_db(o.db_url, migrate=False)[1]() as s:
        exp_id = s.scalar(select(Generation.experiment_id).limit(1))
        newest, turns = stored_cost_model(s, exp_id), stored_cost_model(s, exp_id, stage="timing")
        seconds = list(s.scalars(select(CostModel.measure_s).order_by(CostModel.id)))
    assert newest.tables == 2 and newest.all_measure_s == pytest.approx(sum(seconds))  # the first, the one in turns
    assert turns.table == newest.table and newest.table.meta["turn_s"] == pytest.approx(seconds[1:])
    assert f"{len(newest.samples)} real rounds timed in 2 turns among the timed cells" in newest.measured()
    assert "the newest of the experiment's 2 tables" in newest.measured()


def test_replays_are_predicted_and_timed_cells_carry_their_prediction(replayed):
    o, *_ = replayed
    assert rows(o, func.count(CostModel.id))[0][0] == 3  # the first table, and again at the timings in two turns
    found = rows(o, Generation.measure, Generation.wall_s, Generation.predicted_wall_s, Generation.draft_s)
    for measure, wall, predicted, draft_s in found:
        assert predicted is not None and predicted > draft_s >= 0
        if measure == "replay":
            assert wall == predicted
    # the machine's pace: the table's before and after its rounds, every timed greedy generation's before it
    paces = rows(o, Generation.measure, Generation.pace_s)
    assert all((p is not None and p > 0) == (m == "timed") for m, p in paces)
    assert rows(o, CostModel.costs)[0][0]["meta"]["pace_s"] > 0
    timed = [(w, p) for m, w, p, _ in found if m == "timed"]
    ratios = sorted(p / w for w, p in timed)
    assert 0.2 < ratios[len(ratios) // 2] < 5  # the model is in the measured range, not off by orders


def test_replay_cells_ran_on_the_cpu_workers_and_a_rerun_adds_nothing(replayed):
    o, _, spec, *_ = replayed
    workers = rows(o, Cell.kind, Cell.worker, Cell.state)
    assert {w for k, w, _ in workers if k == "replay"} and all(s == "done" for _, _, s in workers)
    assert all(not str(w).startswith("accelerator") for k, w, _ in workers if k == "replay")
    # the worker that made the references only waited for the replays, so it was stopped (its CPU replayed too) and
    # a fresh one timed the cells after them
    accelerator = {k: {w for kind, w, _ in workers if kind == k} for k in ("reference", "sweep")}
    assert len(accelerator["reference"]) == len(accelerator["sweep"]) == 1
    assert accelerator["reference"] != accelerator["sweep"]
    before = rows(o, func.count(Generation.id))[0][0]
    again = run_spec_file(spec, o)
    assert again.added == 0 and again.counts.get("failed", 0) == 0
    assert rows(o, func.count(Generation.id))[0][0] == before


def _timed(o) -> dict[str, tuple[int, float, list]]:
    """Cell key -> (generation id, wall time, timed runs) of the timed greedy generations."""
    stmt = select(Cell.key, Generation.id, Generation.wall_s, Generation.wall_s_runs).join(Cell)
    with open_db(o.db_url, migrate=False)[1]() as s:
        found = s.execute(stmt.where(Generation.measure == "timed", Generation.temperature == 0)).all()
    return {key: (gen_id, wall, runs) for key, gen_id, wall, runs in found}


def test_the_sample_timed_twice_is_timed_again_after_every_first_timing_and_a_resume_finishes_it(replayed):
    """The `timed_twice` sample (the spec's default half of the timed greedy generations): each holds two timings of
    its rounds, its wall time the first's; the second timings ran once every timed cell was done and every first
    timing stored; one left by a kill (its second timing not stored) is timed by a rerun, and nothing else runs."""
    o, _, spec, seen, labels = replayed
    sweep = parse_spec(spec.read_text()).sweep
    timed = _timed(o)
    twice = {key for key in timed if sweep.timed_runs(key, 0.0) == 2}
    assert twice and twice != set(timed)  # a seeded half: some, not all
    for key, (_, wall, runs) in timed.items():
        assert len(runs) == (2 if key in twice else 1) and wall == runs[0] and all(r > 0 for r in runs)
    assert sum(n for n, _, _ in seen) == len(twice)
    assert all(stored == len(timed) and left == 0 for _, stored, left in seen)
    assert labels[-1] == f"{len(twice)}/{len(twice)} (the run's timing noise)"  # the last line: all of them done

    key = sorted(twice)[0]
    gen_id, wall, _ = timed[key]
    with open_db(o.db_url, migrate=False)[1]() as s:
        s.get(Generation, gen_id).wall_s_runs = [wall]
        s.commit()
    before = rows(o, func.count(Generation.id), func.max(Generation.id))[0]
    again = run_spec_file(spec, o)
    assert again.added == 0 and again.counts.get("failed", 0) == 0
    assert rows(o, func.count(Generation.id), func.max(Generation.id))[0] == before
    after = _timed(o)
    assert len(after[key][2]) == 2 and after[key][1] == after[key][2][0] == wall
    assert {k: v for k, v in after.items() if k != key} == {k: v for k, v in timed.items() if k != key}
