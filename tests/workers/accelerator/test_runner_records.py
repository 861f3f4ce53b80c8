"""The one mapping from a generation's result to its record (`workers.contracts.generation_record`), by field name."""

from __future__ import annotations

from dataclasses import fields

from workers.contracts import FROM_RESULT, RECORD_ONLY, RESULT_ONLY, GenerationRecord, generation_record
from workers.decoding import GenerationResult


def _result() -> GenerationResult:
    return GenerationResult(
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
        seed=7,
        depth_per_step=(3, 3),
        passes=((4, 0, 1), (3, 4, 3)),
    )


def test_every_result_field_reaches_the_record_but_the_named_ones():
    result = {f.name for f in fields(GenerationResult)}
    record = {f.name for f in fields(GenerationRecord)}
    assert set(FROM_RESULT) == result - set(RESULT_ONLY) == record - set(RECORD_ONLY)
    assert set(RESULT_ONLY) <= result and set(RECORD_ONLY) <= record


def test_the_record_holds_the_results_values_frozen():
    res = _result()
    rec = generation_record(res, 4, "x y", "cpu", wall_s_runs=(0.6, 0.5))
    for name in FROM_RESULT:
        value = getattr(res, name)
        assert getattr(rec, name) == (tuple(value) if isinstance(value, list) else value), name
    assert isinstance(rec.tokens, tuple) and isinstance(rec.accept_hist, tuple)
    assert (rec.n_prompt_tokens, rec.text, rec.device, rec.wall_s_runs) == (4, "x y", "cpu", (0.6, 0.5))
    assert (rec.measure, rec.energy, rec.predicted_wall_s) == ("timed", None, None)
    assert generation_record(res, 4, "x", "replay", measure="replay").measure == "replay"
