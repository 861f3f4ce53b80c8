"""The summary's definitions (per-prompt means, pooled, MAL, first-token acceptance, energy ratio) on hand-made data.

Every expected number is worked out by hand from the table in tests/storage/known.py; the arithmetic is beside it.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.summary import summary_frame
from storage.db import open_db
from storage.queries import status_counts
from tests.storage.known import EXPERIMENT, build


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('known') / 'known.db'}"
    build(url)
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        yield s


def _row(df: pd.DataFrame, strategy: str, k: int, regime: str) -> pd.Series:
    rows = df[(df["strategy"] == strategy) & (df["k"] == k) & (df["regime"] == regime)]
    assert len(rows) == 1
    return rows.iloc[0]


@pytest.fixture(scope="module")
def means(session) -> pd.DataFrame:
    return summary_frame(session, EXPERIMENT)


@pytest.fixture(scope="module")
def pooled(session) -> pd.DataFrame:
    return summary_frame(session, EXPERIMENT, pooled=True)


def test_one_row_per_strategy_k_regime(means):
    assert len(means) == 5  # plain x 2 regimes, ngram k=2 x 2 regimes, ngram k=3 uncached
    assert set(means["aggregation"]) == {"per-prompt mean"}
    assert _row(means, "ngram", 2, "uncached")["prompts"] == 2


def test_tokens_per_s_and_speedup_are_means_over_prompts(means):
    plain = _row(means, "plain", 0, "uncached")
    assert plain["tokens_per_s"] == pytest.approx(6.25)  # (10/1.0 + 10/4.0) / 2 = (10 + 2.5) / 2
    ngram = _row(means, "ngram", 2, "uncached")
    assert ngram["tokens_per_s"] == pytest.approx(15.0)  # (10/0.5 + 10/1.0) / 2 = (20 + 10) / 2
    assert ngram["speedup"] == pytest.approx(2.4)  # 15 / 6.25
    # ngram k=3 ran prompt 0 only: paired with plain's prompt 0 alone, (10/0.8) / (10/1.0) = 12.5 / 10
    assert _row(means, "ngram", 3, "uncached")["speedup"] == pytest.approx(1.25)
    assert _row(means, "ngram", 2, "cached")["speedup"] == pytest.approx(1.25)  # (10/0.4) / (10/0.5) = 25 / 20
    assert plain["speedup"] == pytest.approx(1.0)


def test_pooled_is_sum_over_sum(pooled):
    assert set(pooled["aggregation"]) == {"pooled"}
    assert _row(pooled, "plain", 0, "uncached")["tokens_per_s"] == pytest.approx(4.0)  # 20 tokens / 5.0 s
    ngram = _row(pooled, "ngram", 2, "uncached")
    assert ngram["tokens_per_s"] == pytest.approx(40 / 3)  # 20 tokens / 1.5 s
    assert ngram["speedup"] == pytest.approx(10 / 3)  # (20/1.5) / (20/5.0) = 13.33 / 4
    assert ngram["acceptance"] == pytest.approx(1 / 3)  # (5 + 3) accepted / (10 + 14) drafted = 8 / 24
    assert ngram["mal"] == pytest.approx(2 / 3)  # 8 accepted / (5 + 7) rounds
    assert ngram["first_token_acceptance"] == pytest.approx(0.5)  # ((5-2) + (7-4)) / (5 + 7) = 6 / 12
    assert _row(pooled, "plain", 0, "uncached")["mean_power_w"] == pytest.approx(80.0)  # 400 J / 5.0 s


def test_acceptance_and_mal_are_means_over_prompts(means):
    ngram = _row(means, "ngram", 2, "uncached")
    assert ngram["acceptance"] == pytest.approx((0.5 + 3 / 14) / 2)  # (5/10 + 3/14) / 2 = 0.3571
    assert ngram["mal"] == pytest.approx((1.0 + 3 / 7) / 2)  # (5 accepted / 5 rounds + 3/7) / 2 = 0.7143
    assert _row(means, "ngram", 3, "uncached")["mal"] == pytest.approx(1.5)  # 6 accepted / 4 rounds
    plain = _row(means, "plain", 0, "uncached")
    assert plain["mal"] == 0.0 and math.isnan(plain["acceptance"])


def test_cached_mal_counts_fastpath_rejects_not_the_prefill(means):
    cached = _row(means, "ngram", 2, "cached")
    # 2+0+0+2+1+0+2 = 7 accepted over 7 rounds (its 2 fast-path rejects included; the prefill is not a round)
    assert cached["mal"] == pytest.approx(1.0)
    assert cached["acceptance"] == pytest.approx(7 / 12)  # 7 accepted / (6 rounds with a draft x 2) drafted


def test_first_token_acceptance(means):
    # uncached: rounds whose first draft token was accepted / all rounds = (rounds - hist[0]) / rounds
    ngram = _row(means, "ngram", 2, "uncached")
    assert ngram["first_token_acceptance"] == pytest.approx((3 / 5 + 3 / 7) / 2)  # ((5-2)/5 + (7-4)/7) / 2
    assert _row(means, "ngram", 3, "uncached")["first_token_acceptance"] == pytest.approx(0.5)  # (4-2) / 4
    # cached fast path: 1 - rejects / rounds with a draft = 1 - 2 / ((7-3) + 2); the empty-draft round is not one
    assert _row(means, "ngram", 2, "cached")["first_token_acceptance"] == pytest.approx(2 / 3)
    assert math.isnan(_row(means, "plain", 0, "cached")["first_token_acceptance"])


def test_energy_per_100_tokens_and_ratio_plain_over_strategy(means):
    plain = _row(means, "plain", 0, "uncached")
    assert plain["j_per_100_tokens"] == pytest.approx(2000.0)  # (100/10*100 + 300/10*100) / 2 = (1000 + 3000) / 2
    ngram = _row(means, "ngram", 2, "uncached")
    assert ngram["j_per_100_tokens"] == pytest.approx(500.0)  # (400 + 600) / 2
    assert ngram["energy_ratio"] == pytest.approx(4.0)  # plain 2000 / ngram 500: higher is better
    assert ngram["tokens_per_j"] == pytest.approx(0.2)  # 100 / 500
    assert _row(means, "ngram", 3, "uncached")["energy_ratio"] == pytest.approx(1.25)  # prompt 0's 1000 / 800
    cached = _row(means, "ngram", 2, "cached")
    assert cached["energy_ratio"] == pytest.approx(2 / 3)  # plain 200 / ngram 300: costs energy
    assert plain["power_source"] == "nvml" and bool(plain["power_measured"])
    assert ngram["exact_match"] == pytest.approx(0.5)  # prompt 0 matches, prompt 1 does not


def test_status_counts_in_one_grouped_query(session):
    counts = status_counts(session, EXPERIMENT)
    assert counts["cells"] == {"pending": 1, "running": 0, "done": 9, "failed": 0}  # 7 sweep + 2 references done
    assert counts["sweep"] == {"pending": 1, "running": 0, "done": 7, "failed": 0}
    assert counts["reference"]["done"] == 2 and counts["train"]["done"] == 0
    assert counts["generations"] == 7
    assert status_counts(session, "nope")["generations"] == 0


def test_missing_experiment_gives_an_empty_table(session):
    assert summary_frame(session, "nope").empty


def test_an_earlier_version_of_a_cell_is_never_averaged_in(tmp_path):
    """A spec edited between runs leaves a done generation of the old version beside the new one (another cell key,
    the same coordinate and prompt): the summary shows only the newest, and says how many it left out."""
    from sqlalchemy import insert

    from storage.models import Cell, Experiment, Generation
    from storage.summary import superseded
    from tests.storage.known import ROWS, _generation

    url = f"sqlite:///{tmp_path / 'v.db'}"
    build(url)
    engine, Session = open_db(url, migrate=False)
    with engine.begin() as conn:
        exp_id = conn.scalar(select_id(Experiment, EXPERIMENT))
        newer = list(ROWS[2])  # ngram k=2 uncached, prompt 0: 0.5 s before
        newer[9] = 2.0  # the new version: 10 tokens in 2.0 s, 5 tokens/s
        cell_id = conn.execute(
            insert(Cell).values(
                experiment_id=exp_id,
                key="s2-v2",
                kind="sweep",
                state="done",
                strategy="ngram",
                draft="ngram",
                task="t",
                prompt_index=0,
                k=2,
                regime="uncached",
                params={},
            )
        ).inserted_primary_key[0]
        conn.execute(insert(Generation).values(**_generation(cell_id, exp_id, tuple(newer))))
    with Session() as s:
        df = summary_frame(s, EXPERIMENT)
        assert superseded(s, exp_id) == 1
    row = _row(df, "ngram", 2, "uncached")
    assert row["prompts"] == 2 and row["generations"] == 2  # not 3 generations over 2 prompts
    assert row["tokens_per_s"] == pytest.approx(7.5)  # (10/2.0 + 10/1.0) / 2, the old 20 left out
    engine.dispose()


def select_id(model, name):
    from sqlalchemy import select

    return select(model.id).where(model.name == name)
