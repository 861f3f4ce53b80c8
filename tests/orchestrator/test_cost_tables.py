"""Round-cost tables as artifacts, on a real tiny transformers verifier and real SQLite files: measured at 1 and 2
threads with their noise and reference check, written and read back as files, stored and found; an experiment's
replayed generations re-predicted with another table, checked by hand (timed rows never copied, every predicted time
`predict_generation` over the stored passes). How near a re-prediction comes to a run timed on the table's device is
a measurement, not a test: `python -m bench repredict` (BENCHMARKS.md)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select

import greenspec
from greenspec.frames import export_frame
from greenspec.repredict import repredict
from orchestrator.run.driver import Derived, resume
from orchestrator.run.options import RunOptions
from storage.cost_tables import find_table, store_table, tables_frame
from storage.db import open_db
from storage.models import Cell, CostModel, Experiment, Generation, Reference
from storage.repredict import is_tree
from storage.validation import stored_cost_model
from tests.orchestrator import costs_support as cs
from workers.decoding.costmodel import predict_generation
from workers.decoding.passes import REGIMES
from workers.portable_tables import (
    CostTableError,
    make_references,
    read_table_file,
    reference_agreement,
    table_file,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def verifier():
    return cs.tiny_verifier(hidden=128, layers=2)


@pytest.fixture(scope="module")
def tables(verifier):
    return {threads: cs.measure(verifier, "tiny", threads, repeats=2) for threads in (1, 2)}


def test_a_table_measured_at_one_and_two_threads_describes_itself(tables):
    for threads, (table, samples) in tables.items():
        m = table.meta
        assert m["threads"] == threads and m["dtype"] == "float32" and m["model"] == "tiny"
        assert m["cores"] >= 1 and m["memory_gb"] > 0 and m["vocab_size"] == cs.VOCAB and m["device_name"]
        assert m["agreement"] == 1.0 and m["agreement_positions"] == 16 and m["references"] == 2
        assert m["energy"] in ("measured", "estimated") and m["mean_power_w"] > 0
        assert (m["joules_per_round"] is None) == (m["energy"] == "estimated")
        assert set(table.noise) == set(REGIMES) and all(0 <= v < 1 for v in table.noise.values())
        for name in (
            "uncached/chain/3",
            "uncached/tree/3",
            "cached/first/0",
            "cached/chain/0",
            "cached-standard/first/3",
        ):
            assert name in table.rows, name
        assert len(samples) == 2 * len({(g, k, n, c) for g, k, n, c, _ in samples})  # two repeats of each round
        assert read_table_file(table_file(table, "t", samples), "t.json") == (table, "t", samples)


def test_the_reference_check_counts_the_positions_another_model_disagrees_on(verifier):
    refs = make_references("tiny", verifier, cs.prompts(2, seed=9), 8)
    assert reference_agreement(verifier, refs) == (1.0, 16)
    other = cs.tiny_verifier(seed=4, hidden=128, layers=2)
    share, positions = reference_agreement(other, refs)
    assert positions == 16 and share < 1.0
    assert reference_agreement(verifier, []) == (None, 0)


@pytest.mark.parametrize(
    "text, words",
    [
        ("{not json", "corrupt or truncated JSON"),
        ("[1, 2]", "not a cost table"),
        ('{"verifier": "v", "device": "cpu", "rows": {}}', "no rows"),
        ('{"verifier": "v", "device": "cpu", "rows": {"fast/chain/0": [[8, 0.1]]}}', "regime/kind/n"),
        ('{"verifier": "v", "device": "cpu", "rows": {"cached/chain/0": [[8, -0.1]]}}', "positive"),
        ('{"verifier": "v", "device": "cpu", "rows": {"cached/chain/0": [[8]]}}', "malformed"),
    ],
)
def test_a_bad_table_file_is_refused_in_one_line(text, words):
    with pytest.raises(CostTableError, match=words) as err:
        read_table_file(text, "t.json")
    assert "\n" not in str(err.value) and str(err.value).startswith("t.json: ")


def test_a_truncated_table_file_is_refused(tables):
    text = table_file(*tables[1][:1], "t", tables[1][1])
    with pytest.raises(CostTableError, match="truncated"):
        read_table_file(text[: len(text) // 2], "t.json")


def test_tables_are_stored_once_named_and_found(tmp_path, tables):
    (one, samples), (two, _) = tables[1], tables[2]
    _, Session = open_db(f"sqlite:///{tmp_path / 't.db'}")
    with Session() as s:
        row, new = store_table(s, one, samples=samples)
        assert new and row.name == "tiny-cpu-1t-float32" and row.threads == 1 and row.agreement == 1.0
        assert store_table(s, one)[0].id == row.id and not store_table(s, one)[1]  # the same table: stored once
        again, new = store_table(s, replace(one, noise={}))
        assert new and again.name == "tiny-cpu-1t-float32-2"  # the same key, another table
        with pytest.raises(CostTableError, match="already named"):
            store_table(s, two, name=row.name)
        s.commit()
        assert find_table(s, str(row.id)).name == row.name and find_table(s, row.name).id == row.id
        assert find_table(s, "nope") is None
        frame = tables_frame(s)
        assert list(frame["name"]) == ["tiny-cpu-1t-float32", "tiny-cpu-1t-float32-2"]
        assert frame["device"][0].startswith("cpu: ") and "uncached" in frame["noise"][0]


@pytest.fixture(scope="module")
def small(tmp_path_factory, verifier):
    return cs.build(tmp_path_factory.mktemp("small") / "g.db", verifier, threads=1)


def rows(url: str, model, *columns, **where):
    """`model`'s rows (or these of its columns) where each keyword equals its value."""
    with open_db(url, migrate=False)[1]() as s:
        stmt = select(*(columns or (model,)))
        for key, value in where.items():
            stmt = stmt.where(getattr(model, key) == value)
        return s.execute(stmt).all() if columns else s.scalars(stmt).all()


def _store(url: str, table, samples=()):
    with open_db(url)[1]() as s:
        row, _ = store_table(s, table, samples=samples)
        s.commit()
        return row.id, row.name


def test_an_experiment_re_predicted_by_hand(small, tables):
    one, samples = tables[1]
    table_id, name = _store(small.url, one, samples)
    source = rows(small.url, Generation, experiment_id=small.exp_id)
    done = repredict(small.url, "small", name)
    assert done.name == f"small@{name}" and not done.reused and done.timed_left == len(small.coords)
    (derived,) = rows(small.url, Experiment, name=done.name)
    assert derived.device.startswith(f"predicted for {name} (cpu: ") and "1 threads" in derived.device
    assert derived.spec_toml.startswith("# predicted_for = ")
    gens = rows(small.url, Generation, experiment_id=derived.id)
    replays = {(g.strategy, g.regime, g.prompt_index): g for g in source if g.measure == "replay"}
    assert len(gens) == len(replays) == len(small.coords) and {g.measure for g in gens} == {"replay"}
    for g in gens:
        src = replays[(g.strategy, g.regime, g.prompt_index)]
        wall = predict_generation(one, g.regime, src.passes, src.draft_s, "-tree" in g.strategy)
        assert g.wall_s == pytest.approx(wall) and g.predicted_wall_s == pytest.approx(wall)
        assert g.verify_s == pytest.approx(wall - src.draft_s) and g.wall_s_runs == [pytest.approx(wall)]
        assert g.tokens_per_s == pytest.approx(len(src.tokens) / wall) and g.device == derived.device
        assert (g.tokens, g.passes, g.accepted, g.accept_hist, g.exact_match) == (
            src.tokens,
            src.passes,
            src.accepted,
            src.accept_hist,
            src.exact_match,
        )
        power = one.meta["mean_power_w"]
        assert g.energy_j == pytest.approx(wall * power) and g.power_measured is False
    assert any(is_tree(g.strategy) for g in gens)
    refs = rows(small.url, Reference, Reference.prompt_key, experiment_id=derived.id)
    assert sorted(k for (k,) in refs) == ["ref0", "ref1"]
    kinds = {k for (k,) in rows(small.url, Cell, Cell.kind, experiment_id=derived.id)}
    assert kinds == {"reference", "replay"}  # no timed cell, no cost model cell
    (model,) = rows(small.url, CostModel, experiment_id=derived.id)
    assert model.costs["rows"] == json.loads(one.to_json())["rows"] and len(model.samples) == len(samples)
    with open_db(small.url, migrate=False)[1]() as s:
        frame = export_frame(s, done.name)
        stored = stored_cost_model(s, derived.id)  # its table has no cell: read all the same
    assert stored.table.rows == one.rows and stored.tables == 1 and len(stored.samples) == len(samples)
    assert set(frame["measure"]) == {"replay"} and set(frame["predicted_for"]) == {derived.device}
    assert list(frame.columns).index("predicted_for") == list(frame.columns).index("measure") + 1
    again = repredict(small.url, "small", str(table_id))  # by id: the same derived experiment, reused
    assert again.reused and again.name == done.name
    assert len(rows(small.url, Generation, Generation.id, experiment_id=derived.id)) == len(gens)
    after = rows(small.url, Generation, experiment_id=small.exp_id)  # the source is untouched
    assert [(g.id, g.wall_s, g.device, g.energy_j) for g in after] == [
        (g.id, g.wall_s, g.device, g.energy_j) for g in source
    ]


def test_a_re_predicted_experiment_is_never_resumed(small, tables):
    one, samples = tables[1]
    _, name = _store(small.url, one, samples)
    done = repredict(small.url, "small", name)
    before = rows(small.url, Cell, Cell.id, Cell.state)
    with pytest.raises(
        Derived,
        match=rf"experiment '{re.escape(done.name)}' is predicted for .* re-predicted from "
        r"experiment 'small': it is not run or resumed; resume 'small'",
    ):
        resume(RunOptions(db_url=small.url), done.name)
    assert rows(small.url, Cell, Cell.id, Cell.state) == before  # nothing written, the source not run either


def test_a_table_below_full_agreement_says_so_in_the_name_and_label(small, tables):
    one, _ = tables[1]
    doubtful = replace(one, meta={**one.meta, "agreement": 0.875, "dtype": "float16"})
    _, name = _store(small.url, doubtful)
    frame = greenspec.open_results(small.url).repredicted("small", name)  # the library's way: the export table
    assert set(frame["experiment"]) == {f"small@{name} (agreement 87.5%)"}
    assert "reference agreement 87.5%, below 100%" in frame["predicted_for"][0]


def test_the_verifier_is_read_from_the_experiments_spec(tmp_path, verifier, tables):
    one, _ = tables[1]
    spec = (ROOT / "examples" / "demo.toml").read_text()  # verifier smollm2-135m
    b = cs.build(tmp_path / "s.db", verifier, n_prompts=1, rounds=1, spec=spec)
    foreign = replace(one, verifier="gemma:torch.float32", meta={**one.meta, "model": "gemma3-270m"})
    _, name = _store(b.url, foreign)
    with pytest.raises(CostTableError, match="'gemma3-270m', experiment 'small' ran 'smollm2-135m'"):
        repredict(b.url, "small", name)
    wide = replace(one, verifier="w:torch.float32", meta={**one.meta, "model": "smollm2-135m", "vocab_size": 49152})
    _, name = _store(b.url, wide)
    with pytest.raises(CostTableError, match="vocabulary of 49152 tokens, the references of experiment 'small' 512"):
        repredict(b.url, "small", name)
    smol = replace(one, verifier="smol:torch.float32", meta={**one.meta, "model": "smollm2-135m"})
    _, name = _store(b.url, smol)
    assert repredict(b.url, "small", name).generations == len(b.coords)
