"""`timed_twins_s`: the predicted seconds of the timed cells still to run, read off their replayed twins (the same
strategy, task, k, regime and prompt) on a real SQLite file; what the progress's ETA takes before any timed cell ran."""

from __future__ import annotations

from sqlalchemy import insert

from storage.db import open_db
from storage.models import Cell, Experiment, Generation
from storage.queries import timed_twins_s
from tests.analysis.test_summary_edges import _generation


def _cell(conn, exp_id: int, key: str, kind: str, state: str, prompt: int, k: int, temperature: float = 0.0) -> int:
    strategy = "plain" if k == 0 else "ngram"
    values = dict(experiment_id=exp_id, key=key, kind=kind, state=state, strategy=strategy, draft=strategy, task="t")
    values |= dict(prompt_index=prompt, k=k, regime="uncached", temperature=temperature, params={})
    return conn.execute(insert(Cell).values(**values)).inserted_primary_key[0]


def test_each_timed_cell_left_takes_its_replayed_twins_seconds(tmp_path):
    engine, Session = open_db(f"sqlite:///{tmp_path / 't.db'}")
    with engine.begin() as conn:
        exp_id = conn.execute(insert(Experiment).values(name="e", spec_toml="", spec_hash="")).inserted_primary_key[0]
        other = conn.execute(insert(Experiment).values(name="o", spec_toml="", spec_hash="")).inserted_primary_key[0]
        for name, prompt, k, wall in (("a", 0, 0, 2.0), ("b", 1, 0, 3.0), ("c", 0, 1, 1.5)):  # the replayed twins
            cell_id = _cell(conn, exp_id, f"replay-{name}", "replay", "done", prompt, k)
            row = _generation("a", cell_id, exp_id) | dict(prompt_index=prompt, k=k, wall_s=wall, measure="replay")
            row |= dict(strategy="plain" if k == 0 else "ngram", draft="plain" if k == 0 else "ngram")
            conn.execute(insert(Generation).values(**row))
        _cell(conn, exp_id, "timed-a", "sweep", "pending", 0, 0)
        _cell(conn, exp_id, "timed-c", "sweep", "running", 0, 1)
        _cell(conn, exp_id, "timed-b", "sweep", "done", 1, 0)  # ran already: not left
        _cell(conn, exp_id, "timed-none", "sweep", "pending", 5, 0)  # no twin stored yet
        _cell(conn, exp_id, "sampled", "sweep", "pending", 0, 0, temperature=0.8)  # sampled: never replayed
        _cell(conn, other, "elsewhere", "sweep", "pending", 0, 0)  # another experiment's
    with Session() as s:
        assert sorted(timed_twins_s(s, exp_id)) == [("timed-a", 2.0), ("timed-c", 1.5)]
        assert timed_twins_s(s, other) == []  # its twins are not stored in it
    engine.dispose()


def test_timing_noise_reads_the_newest_generation_of_each_prompt_timed_twice(db_url):
    """On SQLite and PostgreSQL: only the newest timed greedy generation of a coordinate and prompt counts, and only
    where it holds two runs (one run, JSON null, a sampled one: no noise)."""
    import math

    from storage.validation import timing_noise
    from workers.decoding.passes import width_band

    engine, Session = open_db(db_url)
    with engine.begin() as conn:
        exp_id = conn.execute(insert(Experiment).values(name="e", spec_toml="", spec_hash="")).inserted_primary_key[0]
        for n, (prompt, runs, temperature) in enumerate(
            ((0, [1.0, 1.2], 0.0), (0, [2.0], 0.0), (1, [1.0, 1.1], 0.0), (2, None, 0.0), (3, [1.0, 2.0], 0.8))
        ):  # prompt 0 timed twice, then once again (newer): its newest has one run
            cell_id = _cell(conn, exp_id, f"c{n}", "sweep", "done", prompt, 1, temperature)
            row = _generation("a", cell_id, exp_id) | dict(prompt_index=prompt, k=1, temperature=temperature)
            row |= dict(strategy="ngram", draft="ngram", wall_s_runs=runs)
            conn.execute(insert(Generation).values(**row))
    with Session() as s:
        noise = timing_noise(s, exp_id)
    engine.dispose()
    assert list(noise["regime"]) == ["uncached"] and list(noise["band"]) == [width_band("ngram", 1)]
    assert noise["noise"].iloc[0] == abs(1.1 / 1.0 - 1) / math.sqrt(2)


def test_a_second_timing_is_appended_to_its_generation_and_one_of_other_work_is_no_noise_pair(db_url):
    """On SQLite and PostgreSQL: `once_timed` lists the timed greedy generations timed once, in storing order (not a
    replayed, sampled or twice-timed one); `add_second_timing` appends a timing of the same rounds (the wall time, the
    first timing's, kept) and, for one that made other rounds, null (naming the round that differs), which the noise and spread readers skip."""
    import math

    from storage import store
    from storage.queries import identical_pass_noise, timing_spread
    from storage.validation import timing_noise

    engine, Session = open_db(db_url)
    with engine.begin() as conn:
        exp_id = conn.execute(insert(Experiment).values(name="e", spec_toml="", spec_hash="")).inserted_primary_key[0]
        ids = {}
        for n, (measure, runs, temperature) in enumerate(
            (("timed", [1.0], 0.0), ("timed", [2.0], 0.0), ("replay", [1.0], 0.0), ("timed", [1.0], 0.8))
            + (("timed", [1.0, 1.1], 0.0),)
        ):
            cell_id = _cell(conn, exp_id, f"c{n}", "sweep", "done", n, 1, temperature)
            row = _generation("a", cell_id, exp_id) | dict(prompt_index=n, k=1, temperature=temperature)
            row |= dict(strategy="ngram", draft="ngram", wall_s=runs[0], wall_s_runs=runs, measure=measure)
            row |= dict(tokens_per_step=[1] * len(row["tokens"]), passes=[[1, t, 1] for t in range(len(row["tokens"]))])
            ids[f"c{n}"] = conn.execute(insert(Generation).values(**row)).inserted_primary_key[0]
    with Session() as s:
        assert store.once_timed(s, exp_id) == [(ids["c0"], "c0"), (ids["c1"], "c1")]
        stored = s.get(Generation, ids["c0"])
        same = _record(stored, 1.2)
        other = _record(s.get(Generation, ids["c1"]), 1.3, tokens_per_step=(2,) + (1,) * (len(stored.tokens) - 2))
        assert store.add_second_timing(s, ids["c0"], same) is None
        assert (
            "first timing and second timing generations diverge at round 0 (tokens_per_step"
            in store.add_second_timing(s, ids["c1"], other)
        )
        s.commit()
    with Session() as s:
        assert s.get(Generation, ids["c0"]).wall_s_runs == [1.0, 1.2] and s.get(Generation, ids["c0"]).wall_s == 1.0
        assert s.get(Generation, ids["c1"]).wall_s_runs == [2.0, None]
        assert store.once_timed(s, exp_id) == []  # neither is due again
        noise = sorted(timing_noise(s, exp_id)["noise"])
        assert noise == [abs(1.1 - 1) / math.sqrt(2), abs(1.2 - 1) / math.sqrt(2)]
        assert identical_pass_noise(s, exp_id)["generations"] == 2
        assert timing_spread(s, exp_id)["generations"] == 2  # c0 and c4; c1 holds one timing of its rounds
    engine.dispose()


def _record(row: Generation, wall: float, **changes):
    """A timed run of a stored generation's rounds, in `wall` seconds (with `changes` to its `Decoded`)."""
    from dataclasses import replace

    from workers.contracts import GenerationRecord
    from workers.decoding.records import Decoded

    d = Decoded(
        tokens=tuple(row.tokens),
        steps=row.steps,
        drafted=row.drafted,
        accepted=row.accepted,
        accept_hist=tuple(row.accept_hist),
        accepted_per_step=tuple(row.accepted_per_step),
        tokens_per_step=tuple(row.tokens_per_step),
        wall_s=wall,
        draft_s=0.0,
        verify_s=wall,
        started_at=0.0,
        ended_at=wall,
        passes=tuple(tuple(p) for p in row.passes),
    )
    return GenerationRecord(replace(d, **changes), row.n_prompt_tokens, "", "cpu", wall_s_runs=(wall,))
