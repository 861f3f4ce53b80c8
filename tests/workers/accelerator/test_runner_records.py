"""A generation's result and its record (`workers.contracts.GenerationRecord`, as the runner and replay build it) hold
the same `workers.decoding.records.Decoded`: the measured fields are declared once."""

from __future__ import annotations

import pickle
from dataclasses import fields

import pytest

from workers.contracts import GenerationRecord
from workers.decoding import GenerationResult
from workers.decoding.records import DECODED_FIELDS, Decoded


def _result() -> GenerationResult:
    decoded = Decoded(
        tokens=[5, 6, 7],
        steps=3,
        drafted=6,
        accepted=3,
        accept_hist=[0, 0, 1, 0],
        accepted_per_step=[2, 1],
        drafted_per_step=[3, 3],
        tokens_per_step=[2, 1],
        wall_s=0.5,
        draft_s=0.1,
        verify_s=0.4,
        started_at=1.0,
        ended_at=1.5,
        fastpath_rejects=1,
        bridged=True,
        stopped="eos",
        first_checked=2,
        first_accepted=1,
        passes=((4, 0, 1), (3, 4, 3)),
    )
    return GenerationResult(decoded, seed=7, depth_per_step=(3, 3))


def test_every_result_field_reaches_the_record_but_the_named_ones():
    result = {f.name for f in fields(GenerationResult)}
    record = {f.name for f in fields(GenerationRecord)}
    # the measured fields are declared once (Decoded) and held by both; neither repeats one of them
    assert result & record == {"decoded"} and not (result | record) & set(DECODED_FIELDS)
    # a record leaves out only the sampler's seed (the cell's) and the tree depths (not stored)
    assert result - {"decoded"} == {"seed", "depth_per_step"}


def test_the_record_holds_the_results_values_frozen():
    res = _result()
    rec = GenerationRecord(res.decoded, 4, "x y", "cpu", wall_s_runs=(0.6, 0.5))
    assert rec.decoded is res.decoded
    for name in DECODED_FIELDS:
        value = getattr(res, name)
        assert getattr(rec, name) == (tuple(value) if isinstance(value, list) else value), name
    assert isinstance(rec.tokens, tuple) and isinstance(rec.accept_hist, tuple)
    assert (rec.n_prompt_tokens, rec.text, rec.device, rec.wall_s_runs) == (4, "x y", "cpu", (0.6, 0.5))
    assert (rec.measure, rec.energy, rec.predicted_wall_s) == ("timed", None, None)
    assert GenerationRecord(res.decoded, 4, "x", "replay", measure="replay").measure == "replay"


def test_a_record_crosses_pickle_and_replaced_changes_its_own_and_its_decoded_fields():
    rec = GenerationRecord(_result().decoded, 4, "x", "cpu")
    assert pickle.loads(pickle.dumps(rec)) == rec  # what Ray does at the boundary
    changed = rec.replaced(wall_s=0.25, tokens=[5, 6], measure="replay")
    assert (changed.wall_s, changed.tokens, changed.measure, changed.steps) == (0.25, (5, 6), "replay", 3)
    assert (rec.wall_s, rec.tokens, rec.measure) == (0.5, (5, 6, 7), "timed")  # the original is left as it was
    with pytest.raises(AttributeError, match="no attribute 'seed'"):
        rec.seed  # noqa: B018 (a record holds no sampler's seed)
