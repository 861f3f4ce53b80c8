"""The summary a run stores as it ends (`analysis.summary.store_summaries`, `orchestrator.run.summaries`): every
export read from it is byte for byte the one computed from the rows, and it is never shown once anything it was
computed from has changed (a new generation, a generation changed in place, a new cost table, an edited spec, other
code). Databases: tests/analysis/test_summary_versions.py's two spec versions (v1: ngram and plain at 16 tokens;
v2: plain alone at 12), stored as a run stores them (tests/greenspec/test_frames.py's SPEC)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from sqlalchemy import insert, select

import analysis.summary as summary_module
from analysis.findings import FINDINGS, findings_version
from analysis.stored import FRAMES, frame, summary_name, summary_version
from analysis.summary import computed_summary, store_summaries, stored_summary
from greenspec.findings import findings_markdown, read_findings
from greenspec.frames import export_frame, render, shown_columns
from orchestrator.run.summaries import keep_summaries, versions
from storage.db import open_db
from storage.models import Cell, CostModel, Experiment, Generation
from storage.stored_frames import read_frame, stored_versions
from tests.analysis.test_summary_versions import V1, V2, _add
from tests.greenspec.test_frames import NGRAM_S, PLAIN_S, PROMPTS, SPEC

NAMES = {"summary", "summary-pooled", "summary-versions", "summary-pooled-versions"}
EVERY = NAMES | set(FRAMES) | {FINDINGS}  # the summaries, the frames pages read whole, the findings


def _build(url: str, runs: list[tuple[str, int, dict]]) -> str:
    """Store each run (its strategies' TOML, max_new_tokens, {strategy: {prompt: wall s}}) in order, the last one's
    spec the experiment's, with reference cells keyed as the grid expansion keys them."""
    from orchestrator.run.cells import TaskPrompts, reference_cells
    from orchestrator.run.spec import parse_spec

    engine, _ = open_db(url)
    with engine.begin() as conn:
        spec_toml = SPEC.format(strategies=runs[-1][0], tokens=runs[-1][1])
        exp_id = conn.execute(
            insert(Experiment).values(name="v", spec_toml=spec_toml, spec_hash="")
        ).inserted_primary_key[0]
        for strategies, tokens, walls in runs:
            spec = parse_spec(SPEC.format(strategies=strategies, tokens=tokens))
            keys = {}
            for c in reference_cells(spec, TaskPrompts("t", PROMPTS)):
                keys[c.prompt_index] = c.key
                values = dict(kind="reference", state="done", task="t", prompt_index=c.prompt_index)
                conn.execute(insert(Cell).values(experiment_id=exp_id, key=c.key, params=c.params.to_json(), **values))
            for strategy, by_prompt in walls.items():
                for prompt, wall_s in by_prompt.items():
                    _add(conn, exp_id, strategy, prompt, tokens, wall_s, keys[prompt])
    engine.dispose()
    return url


V1_RUN = (PLAIN_S + NGRAM_S, 16, {"ngram": {p: w[0] for p, w in V1.items()}, "plain": {p: w[1] for p, w in V1.items()}})
V2_RUN = (PLAIN_S, 12, {"plain": V2})


def _exports(Session) -> dict:
    """Every export of the summary: each format, per-prompt and pooled, the current rows and every version's."""
    out = {}
    with Session() as s:
        for pooled in (False, True):
            for every in (False, True):
                df = export_frame(s, "v", pooled, every)
                for fmt in ("csv", "parquet", "markdown", "latex"):
                    out[fmt, pooled, every] = render(df, fmt, shown_columns(df))
    return out


def _dashboard(Session) -> dict:
    """The dashboard's summaries (every row current), as CSV."""
    with Session() as s:
        return {p: computed_summary(s, 1, p, None).to_csv() for p in (False, True)}


def _no_reads(monkeypatch) -> None:
    """A summary computed from here on fails: what is shown must be the stored one."""

    def refuse(*args, **kwargs):
        raise AssertionError("the summary was computed, not read from the stored one")

    monkeypatch.setattr(summary_module, "group_sums", refuse)
    monkeypatch.setattr(summary_module, "prompt_frame", refuse)


def _cost_model(exp_id: int) -> CostModel:
    """A round-cost table measured for the experiment (tests/storage/test_validation.py's)."""
    from tests.storage.test_validation import SAMPLES, TABLE

    costs = json.loads(TABLE.to_json())
    return CostModel(experiment_id=exp_id, verifier="v", device="d", costs=costs, samples=list(SAMPLES), measure_s=1.0)


def test_every_export_from_the_stored_summary_is_byte_for_byte_the_computed_one(tmp_path, monkeypatch):
    _, Session = open_db(_build(f"sqlite:///{tmp_path / 'v.db'}", [V1_RUN, V2_RUN]))
    computed, dashboard = _exports(Session), _dashboard(Session)
    with Session() as s:
        findings = read_findings(s, "v")
    assert keep_summaries(Session, 1) and keep_summaries(Session, 1) == []  # stored once; a second end: nothing new
    with Session() as s:
        assert set(stored_versions(s, 1)) == EVERY
        stored = {p: stored_summary(s, 1, p, None) for p in (False, True)}
        for name, compute in FRAMES.items():  # the pages' other frames: stored as computed
            pd.testing.assert_frame_equal(frame(s, 1, name), compute(s, 1))
    _no_reads(monkeypatch)
    monkeypatch.setattr("storage.summary.prompt_frame", lambda *a: pytest.fail("the findings were computed"))
    assert _exports(Session) == computed
    assert {p: df.to_csv() for p, df in stored.items()} == dashboard
    with Session() as s:  # the findings as stored: the same frame, its attributes and its text
        stored_findings = read_findings(s, "v")
    pd.testing.assert_frame_equal(stored_findings, findings)
    assert stored_findings.attrs == findings.attrs and findings_markdown(stored_findings) == findings_markdown(findings)
    with Session() as s:
        assert set(export_frame(s, "v", all_versions=True)["version"]) == {"current", "older"}


def test_a_spec_that_marks_nothing_older_reads_the_generations_once_for_both_kinds(tmp_path, monkeypatch):
    _, Session = open_db(_build(f"sqlite:///{tmp_path / 'v.db'}", [V1_RUN]))
    computed, dashboard = _exports(Session), _dashboard(Session)
    reads = []
    real = summary_module.prompt_frame
    monkeypatch.setattr(summary_module, "prompt_frame", lambda *a: reads.append(a[2]) or real(*a))
    with Session() as s:
        assert set(store_summaries(s, 1, versions(s, 1))) == EVERY - {FINDINGS}  # the findings: keep_summaries
        s.commit()
        assert reads == [versions(s, 1)]  # one per-generation read: the dashboard's frames are the export's
        assert {p: stored_summary(s, 1, p, None).to_csv() for p in (False, True)} == dashboard
    _no_reads(monkeypatch)
    assert _exports(Session) == computed


def _stale(Session) -> set[str]:
    """The stored frames no reader would show now."""
    with Session() as s:
        v = versions(s, 1)
        kinds = [(p, w) for p in (False, True) for w in (v, None)]
        stale = {summary_name(p, w) for p, w in kinds if stored_summary(s, 1, p, w) is None}
        due = summary_version(s, 1, None)
        stale |= {n for n in FRAMES if read_frame(s, 1, n, due) is None}
        findings = findings_version(s, 1, s.get(Experiment, 1).spec_toml)
        return stale | ({FINDINGS} if read_frame(s, 1, FINDINGS, findings) is None else set())


def _again(conn, key: str) -> None:
    """v2's plain generation of prompt 0 stored again (its cell run again), in half the time: 24 tokens/s."""
    from tests.storage.known import _generation

    cell_id = conn.execute(
        insert(Cell).values(
            experiment_id=1,
            key="again",
            kind="sweep",
            state="done",
            strategy="plain",
            draft="plain",
            task="t",
            prompt_index=0,
            k=0,
            regime="uncached",
            params={},
        )
    ).inserted_primary_key[0]
    row = ("plain", "plain", 0, "uncached", 0, 12, [0] * 12, 0, 0, 0.5, 10.0)
    conn.execute(insert(Generation).values(**{**_generation(cell_id, 1, row), "prompt_key": key, "measure": "timed"}))


def test_a_new_generation_makes_every_stored_summary_stale_and_the_next_run_end_stores_it_again(tmp_path):
    engine, Session = open_db(_build(f"sqlite:///{tmp_path / 'v.db'}", [V1_RUN, V2_RUN]))
    keep_summaries(Session, 1)
    before = _exports(Session)
    assert _stale(Session) == set()
    with engine.begin() as conn:
        key = conn.execute(select(Cell.key).where(Cell.kind == "reference", Cell.prompt_index == 0)).scalars().all()[-1]
        _again(conn, key)
    assert _stale(Session) == EVERY
    after = _exports(Session)
    assert after != before  # what a reader shows now is computed from the new rows
    with Session() as s:
        plain = export_frame(s, "v")
    assert plain["tokens_per_s"].iloc[0] == pytest.approx((24 + 12) / 2)  # the new prompt 0 (24 tok/s) counted
    assert set(keep_summaries(Session, 1)) == EVERY and _stale(Session) == set()
    assert _exports(Session) == after


def test_rows_changed_in_place_a_new_cost_table_other_code_or_an_edited_spec_make_it_stale(tmp_path, monkeypatch):
    from storage.repredict import repredict_in_place

    _, Session = open_db(_build(f"sqlite:///{tmp_path / 'v.db'}", [V1_RUN, V2_RUN]))
    keep_summaries(Session, 1)

    class Faster:  # a table predicting every generation in half its time (`storage.repredict.Predictor`'s shape)
        def columns(self, regime, passes, draft_s, n, tree) -> dict:
            return {"wall_s": 0.5, "predicted_wall_s": 0.5}

    with Session() as s:
        repredict_in_place(s, 1, Faster())
        s.commit()
        assert stored_versions(s, 1) == {}  # dropped with the rows it was computed from
    keep_summaries(Session, 1)
    with Session() as s:
        s.add(_cost_model(1))
        s.commit()
    assert _stale(Session) == EVERY
    keep_summaries(Session, 1)
    with monkeypatch.context() as mp:
        mp.setattr("analysis.stored.recipe", lambda: "other-code")
        assert _stale(Session) == EVERY
    with monkeypatch.context() as mp:  # the findings' own code (this module and analysis.checks) changed
        mp.setattr("analysis.findings._code_digest", lambda: "other-code")
        assert _stale(Session) == {FINDINGS}
    assert _stale(Session) == set()
    with Session() as s:  # the spec edited back to v1: which rows are current changes, the rows do not
        s.get(Experiment, 1).spec_toml = SPEC.format(strategies=PLAIN_S + NGRAM_S, tokens=16)
        s.commit()
    assert _stale(Session) == {"summary-versions", "summary-pooled-versions", FINDINGS}
