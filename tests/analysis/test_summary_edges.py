"""The summary's edge cases on a second hand-made database: rounds without a draft, one-token drafts, rounds or
first-accepted counts stored as NULL, the engine's `first_checked`, a missing reference, and partial energy (an
earlier version of a cell is never averaged in: tests/analysis/test_summary.py). Every expected number is worked out by hand below (as in tests/analysis/test_summary.py).

| gen | k | prompt | accepted per round | drafted | n  | wall s | draft s | energy J | ROUGE-L | exact | stored as     |
|-----|---|--------|--------------------|---------|----|--------|---------|----------|---------|-------|---------------|
| p   | 0 | 0      | 0 x 10             | 0       | 10 | 2.0    | 0.0     | 100      | 1.0     | True  |               |
| a   | 2 | 0      | 0 x 5              | 0       | 5  | 1.0    | 0.25    | 50       | 0.5     | True  | (no draft)    |
| b   | 2 | 1      | 1                  | 1       | 2  | 0.5    | 0.1     | 20       | 1.0     | None  | (no reference)|
| c   | 3 | 0      | 3, 0               | 6       | 5  | 1.0    | 0.0     | 10       | 1.0     | True  | rounds NULL   |
| d   | 3 | 1      | 2, 2, 0, 1         | 12      | 9  | 1.0    | 0.0     | 10       | 1.0     | True  | first_checked 3 |
| e   | 3 | 2      | 1, 1               | 4       | 4  | 1.0    | 0.0     | 10       | 1.0     | True  | first_accepted NULL |
| f   | 4 | 0      | 1                  | 4       | 2  | 1.0    | 0.0     | 40       | 1.0     | True  |               |
| g   | 4 | 1      | 1                  | 4       | 2  | 1.0    | 0.0     | None     | 1.0     | True  | (no energy)   |

| h   | 5 | 0      | 1                  | 4       | 2  | 1.0    | 0.0     | 10 (estimate) | 1.0 | True |          |
| i   | 5 | 1      | 1                  | 4       | 2  | 1.0    | 0.0     | 10 (nvml, measured) | 1.0 | True |    |
| j   | 6 | 0      | 1                  | 4       | 2  | 1.0    | 0.0     | None     | 1.0     | True  | (no power source) |
| m   | 7 | 0      | 2                  | 2       | 3  | 1.0    | 0.0     | 10       | 1.0     | True  | rounds NULL   |
| q   | 0 | 0      | 0 x 4              | 0       | 4  | 1.0    | 0.0     | 10       | 1.0     | True  | temperature 0.8 |
| s   | 2 | 0      | 1, 1               | 4       | 4  | 0.5    | 0.0     | 10       | 1.0     | True  | temperature 0.8 |

All ngram except p and q (plain), one task, the uncached regime, greedy (temperature 0) unless said. Stored `rounds` = rounds listed, `first_accepted` =
rounds - rounds accepting nothing, unless the last column says otherwise.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from sqlalchemy import insert

from analysis.columns import SUMMARY_COLUMNS
from analysis.summary import summary_frame
from storage.db import open_db
from storage.models import Cell, Experiment, Generation

EXPERIMENT = "edges"
INTERVALS = (
    "tokens_per_s",
    "speedup",
    "acceptance",
    "first_token_acceptance",
    "mal",
    "j_per_100_tokens",
    "energy_ratio",
)
ROWS = {  # name: (k, prompt, accepted per round, drafted, n, wall_s, draft_s, energy_j, rouge_l, exact, overrides)
    "p": (0, 0, [0] * 10, 0, 10, 2.0, 0.0, 100.0, 1.0, True, {}),
    "a": (2, 0, [0] * 5, 0, 5, 1.0, 0.25, 50.0, 0.5, True, {}),
    "b": (2, 1, [1], 1, 2, 0.5, 0.1, 20.0, 1.0, None, {}),
    "c": (3, 0, [3, 0], 6, 5, 1.0, 0.0, 10.0, 1.0, True, {"rounds": None}),
    "d": (3, 1, [2, 2, 0, 1], 12, 9, 1.0, 0.0, 10.0, 1.0, True, {"first_checked": 3}),
    "e": (3, 2, [1, 1], 4, 4, 1.0, 0.0, 10.0, 1.0, True, {"first_accepted": None}),
    "f": (4, 0, [1], 4, 2, 1.0, 0.0, 40.0, 1.0, True, {}),
    "g": (4, 1, [1], 4, 2, 1.0, 0.0, None, 1.0, True, {}),
    "h": (5, 0, [1], 4, 2, 1.0, 0.0, 10.0, 1.0, True, {}),
    "i": (5, 1, [1], 4, 2, 1.0, 0.0, 10.0, 1.0, True, {"power_source": "nvml", "power_measured": True}),
    "j": (6, 0, [1], 4, 2, 1.0, 0.0, None, 1.0, True, {}),
    "m": (7, 0, [2], 2, 3, 1.0, 0.0, 10.0, 1.0, True, {"rounds": None}),
    "q": (0, 0, [0] * 4, 0, 4, 1.0, 0.0, 10.0, 1.0, True, {"temperature": 0.8}),
    "s": (2, 0, [1, 1], 4, 4, 0.5, 0.0, 10.0, 1.0, True, {"temperature": 0.8}),
}


def _generation(name: str, cell_id: int, exp_id: int) -> dict:
    k, prompt, per_round, drafted, n, wall_s, draft_s, energy_j, rouge_l, exact, overrides = ROWS[name]
    accepted = sum(per_round)
    stored = dict(
        cell_id=cell_id,
        experiment_id=exp_id,
        strategy="plain" if k == 0 else "ngram",
        draft="plain" if k == 0 else "ngram",
        task="t",
        prompt_index=prompt,
        prompt_key=f"r{prompt}",  # one reference per prompt: the data version plain is paired by
        k=k,
        regime="uncached",
        n_prompt_tokens=5,
        n_tokens=n,
        steps=len(per_round),
        drafted=drafted,
        accepted=accepted,
        acceptance=accepted / drafted if drafted else None,
        mal=0.0,
        accept_hist=[per_round.count(j) for j in range(k + 1)],
        accepted_per_step=per_round,
        tokens_per_step=None,
        fastpath_rejects=0,
        wall_s=wall_s,
        draft_s=draft_s,
        verify_s=wall_s - draft_s,
        tokens_per_s=n / wall_s,
        started_at=1000.0,
        ended_at=1000.0 + wall_s,
        energy_j=energy_j,
        mean_power_w=energy_j / wall_s if energy_j else None,
        j_per_100_tokens=energy_j / n * 100 if energy_j else None,
        tokens_per_j=n / energy_j if energy_j else None,
        power_source="estimate" if energy_j else None,
        power_measured=False if energy_j else None,
        rouge_l=rouge_l,
        exact_match=exact,
        bridged=False,
        stopped="max_new_tokens",
        device="test",
        tokens=list(range(n)),
        text="x",
        temperature=0.0,
    )
    return {**stored, **overrides}


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-prompt means, pooled) of the database above."""
    url = f"sqlite:///{tmp_path_factory.mktemp('edges') / 'edges.db'}"
    engine, Session = open_db(url)
    with engine.begin() as conn:
        exp_id = conn.execute(
            insert(Experiment).values(name=EXPERIMENT, spec_toml="", spec_hash="")
        ).inserted_primary_key[0]
        for name, row in ROWS.items():
            k, prompt = row[:2]
            cell_id = conn.execute(
                insert(Cell).values(
                    experiment_id=exp_id,
                    key=name,
                    kind="sweep",
                    state="done",
                    strategy="plain" if k == 0 else "ngram",
                    draft="plain" if k == 0 else "ngram",
                    task="t",
                    prompt_index=prompt,
                    k=k,
                    regime="uncached",
                    temperature=row[-1].get("temperature", 0.0),
                    params={},
                )
            ).inserted_primary_key[0]
            conn.execute(insert(Generation).values(**_generation(name, cell_id, exp_id)))
    with Session() as s:
        out = summary_frame(s, EXPERIMENT), summary_frame(s, EXPERIMENT, pooled=True)
        assert list(summary_frame(s, "nope").columns) == SUMMARY_COLUMNS  # no experiment: no rows, same columns
    engine.dispose()
    return out


def _row(df: pd.DataFrame, k: int, temperature: float = 0.0) -> pd.Series:
    rows = df[(df["k"] == k) & (df["temperature"] == temperature)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_rounds_without_a_draft_and_one_token_drafts(frames):
    means, pooled = frames
    k2 = _row(means, 2)
    assert k2["acceptance"] == pytest.approx(1.0)  # only b drafted: 1 accepted / 1 drafted (a's 0/0 is no rate)
    assert k2["mal"] == pytest.approx(0.5)  # (a: 0 / 5 rounds + b: 1 / 1 round) / 2
    assert k2["mean_accepted_tokens"] == pytest.approx(1.5)  # (a: 5 tokens / 5 rounds + b: 2 / 1) / 2
    assert k2["first_token_acceptance"] == pytest.approx(1.0)  # only b drafted: its 1 round accepted its first token
    assert k2["draft_share"] == pytest.approx(0.225)  # (0.25 / 1.0 + 0.1 / 0.5) / 2 = (0.25 + 0.2) / 2
    assert k2["tokens_per_s"] == pytest.approx(4.5)  # (5 / 1.0 + 2 / 0.5) / 2
    # plain ran prompt 0 only: the speedup pairs a with it, 5 / 5 (b has no plain of its prompt), and says so
    assert k2["speedup"] == pytest.approx(1.0)
    assert (
        k2["note"]
        == "speedup over 1 of 2 prompts: the others have no plain generation of the same prompts and max_new_tokens"
    )
    p2 = _row(pooled, 2)
    assert p2["acceptance"] == pytest.approx(1.0)  # (0 + 1) accepted / (0 + 1) drafted
    assert p2["mal"] == pytest.approx(1 / 6)  # 1 accepted / (5 + 1) rounds
    assert p2["mean_accepted_tokens"] == pytest.approx(7 / 6)  # (5 + 2) tokens / 6 rounds
    # rounds with a draft: a has none (0, not its 5 rounds), b 1; accepted first tokens: a 0, b 1
    assert p2["first_token_acceptance"] == pytest.approx(1.0)  # 1 / 1
    assert p2["draft_share"] == pytest.approx(0.35 / 1.5)  # (0.25 + 0.1) s / (1.0 + 0.5) s


def test_a_missing_reference_is_no_mismatch(frames):
    k2 = _row(frames[0], 2)
    assert k2["exact_match"] == pytest.approx(1.0)  # a matched; b had no reference: left out, not counted as 0
    assert k2["rouge_l"] == pytest.approx(0.75)  # (0.5 + 1.0) / 2


def test_energy_and_power_means(frames):
    k2 = _row(frames[0], 2)
    assert k2["j_per_100_tokens"] == pytest.approx(1000.0)  # (50 / 5 * 100 + 20 / 2 * 100) / 2
    assert k2["mean_power_w"] == pytest.approx(45.0)  # (50 J / 1.0 s + 20 J / 0.5 s) / 2
    assert k2["energy_j"] == pytest.approx(70.0)  # 50 + 20
    assert k2["energy_ratio"] == pytest.approx(1.0)  # plain's 100 / 10 * 100 = 1000 over 1000
    assert k2["power_source"] == "estimate"
    assert k2["power_measured"] is not None and not k2["power_measured"]  # estimated, not measured


def test_null_rounds_and_first_accepted_count_as_zero_and_first_checked_wins(frames):
    means, pooled = frames
    k3 = _row(means, 3)
    assert k3["mal"] == pytest.approx(1.125)  # c: no rounds stored, no rate; (d: 5 / 4 + e: 2 / 2) / 2
    assert k3["mean_accepted_tokens"] == pytest.approx(2.125)  # (d: 9 / 4 + e: 4 / 2) / 2
    # c: 1 accepted first token over 0 rounds: no rate; d: 3 / its stored first_checked 3 (not its 4 rounds);
    # e: first_accepted NULL = 0, over 2 rounds
    assert k3["first_token_acceptance"] == pytest.approx(0.5)  # (1.0 + 0.0) / 2
    assert k3["acceptance"] == pytest.approx(17 / 36)  # (3/6 + 5/12 + 2/4) / 3 = (18 + 15 + 18) / 108
    p3 = _row(pooled, 3)
    assert p3["mal"] == pytest.approx(10 / 6)  # (3 + 5 + 2) accepted / (0 + 4 + 2) rounds
    assert p3["first_token_acceptance"] == pytest.approx(0.8)  # (1 + 3 + 0) / (0 + 3 + 2)
    assert (k3["prompts"], k3["generations"]) == (3, 3)


def test_partial_energy_is_left_empty_and_prompts_are_distinct(frames):
    means, pooled = frames
    for df in frames:
        k4 = _row(df, 4)
        assert (k4["prompts"], k4["generations"]) == (2, 2)
        assert math.isnan(k4["energy_j"]) and math.isnan(k4["j_per_100_tokens"])  # g has none: no partial sum
        assert math.isnan(k4["energy_ratio"]) and math.isnan(k4["tokens_per_j"])
    assert math.isnan(_row(means, 4)["mean_power_w"]) and math.isnan(_row(pooled, 4)["mean_power_w"])


def test_columns_order_and_experiment(frames):
    for df in frames:
        assert list(df.columns) == SUMMARY_COLUMNS and list(df.index) == list(range(len(df)))
        assert set(df["experiment"]) == {EXPERIMENT}


def test_pooled_energy(frames):
    p2 = _row(frames[1], 2)
    assert p2["j_per_100_tokens"] == pytest.approx(1000.0)  # (50 + 20) J / (5 + 2) tokens * 100
    assert p2["mean_power_w"] == pytest.approx(70 / 1.5)  # (50 + 20) J / (1.0 + 0.5) s
    assert p2["energy_ratio"] == pytest.approx(1.0)  # plain's 100 J / 10 tokens * 100 = 1000, over 1000


def test_power_sources_mixed_or_absent(frames):
    for df in frames:
        k5, k6 = _row(df, 5), _row(df, 6)
        assert k5["power_source"] == "estimate+nvml"  # two sources in one cell, named both
        assert k5["power_measured"] is not None and not k5["power_measured"]  # one estimated: not measured
        assert pd.isna(k6["power_source"]) and k6["power_measured"] is None  # no energy at all: unknown, not False


def test_sampled_cells_are_compared_with_plain_at_their_temperature(frames):
    means = frames[0]
    assert _row(means, 2, 0.8)["speedup"] == pytest.approx(2.0)  # (4 / 0.5) / plain at 0.8: 4 / 1.0
    assert _row(means, 2, 0.8)["energy_ratio"] == pytest.approx(1.0)  # 10 / 4 * 100 = 250 J/100 tok both
    assert _row(means, 2)["speedup"] == pytest.approx(1.0)  # greedy: still over greedy plain's 5 tok/s (a: 5 / 5)


def test_a_cell_without_known_rounds_has_no_mal(frames):
    for df in frames:  # m: 2 accepted, rounds NULL: 0 known rounds, so no MAL (not 2 / 0 = infinity)
        k7 = _row(df, 7)
        assert math.isnan(k7["mal"]) and math.isnan(k7["mean_accepted_tokens"])


def test_an_experiment_without_generations_gives_no_rows_and_the_columns(tmp_path):
    """An experiment whose cells never ran: `summarize` sees no sums and still returns the export's columns."""
    engine, Session = open_db(f"sqlite:///{tmp_path / 'empty.db'}")
    with engine.begin() as conn:
        exp_id = conn.execute(
            insert(Experiment).values(name="queued", spec_toml="", spec_hash="")
        ).inserted_primary_key[0]
        conn.execute(
            insert(Cell).values(
                experiment_id=exp_id,
                key="c",
                kind="sweep",
                state="pending",
                strategy="plain",
                draft="plain",
                task="t",
                prompt_index=0,
                k=0,
                regime="uncached",
                temperature=0.0,
                params={},
            )
        )
    with Session() as s:
        for pooled in (False, True):
            df = summary_frame(s, "queued", pooled=pooled)
            assert len(df) == 0
            assert list(df.columns) == [
                "experiment",
                "strategy",
                "draft",
                "task",
                "k",
                "regime",
                "temperature",
                "measure",
                "version",
                "prompts",
                "n_prompts",
                "generations",
                "n_tokens",
                "tokens_per_s",
                "speedup",
                "acceptance",
                "first_token_acceptance",
                "mal",
                "mean_accepted_tokens",
                "rouge_l",
                "exact_match",
                "energy_j",
                "j_per_100_tokens",
                "tokens_per_j",
                "energy_ratio",
                "mean_power_w",
                "power_source",
                "power_measured",
                "wall_s",
                "draft_share",
                "aggregation",
                *[f"{m}_{b}" for m in INTERVALS for b in ("lo", "hi")],
                "note",
            ]
    engine.dispose()


def test_without_any_reference_rouge_and_exact_match_are_empty_floats(tmp_path):
    """An experiment none of whose prompts has a reference: ROUGE-L and exact match are NaN in float columns (the
    database's NULL averages come back as None objects; the tables and charts format floats)."""
    engine, Session = open_db(f"sqlite:///{tmp_path / 'norefs.db'}")
    with engine.begin() as conn:
        exp_id = conn.execute(
            insert(Experiment).values(name="norefs", spec_toml="", spec_hash="")
        ).inserted_primary_key[0]
        cell_id = conn.execute(
            insert(Cell).values(
                experiment_id=exp_id,
                key="b",
                kind="sweep",
                state="done",
                strategy="ngram",
                draft="ngram",
                task="t",
                prompt_index=1,
                k=2,
                regime="uncached",
                temperature=0.0,
                params={},
            )
        ).inserted_primary_key[0]
        conn.execute(
            insert(Generation).values(**{**_generation("b", cell_id, exp_id), "rouge_l": None, "exact_match": None})
        )
    with Session() as s:
        for pooled in (False, True):
            df = summary_frame(s, "norefs", pooled=pooled)
            assert len(df) == 1
            for column in ("rouge_l", "exact_match"):
                assert df[column].dtype == "float64" and math.isnan(df[column].iloc[0]), (pooled, column)
    engine.dispose()
