"""Intervals over prompts in the summary, and ratios to plain only within one data version, worked out by hand.

The intervals: on tests/storage/known.py's database, two prompts resampled twice each give three outcomes (both
draws prompt 0, one of each, both prompt 1), and 2,000 resamples reach both extremes, so each 95% interval runs from
the statistic of prompt 0 alone to that of prompt 1 alone (or the other way round).

The versions (a spec edited between runs): v1 runs `ngram` and `plain` at max_new_tokens = 16 over prompts 0 and 1;
v2 drops ngram and runs plain alone at 12. Each version's prompts have their own reference keys ("k16-0", ...).

| generation | strategy | tokens | prompt 0: wall s, tok/s | prompt 1: wall s, tok/s | mean tok/s |
|------------|----------|--------|-------------------------|-------------------------|------------|
| v1         | ngram    | 16     | 1.0, 16                 | 2.0, 8                  | 12         |
| v1         | plain    | 16     | 2.0, 8                  | 4.0, 4                  | 6          |
| v2         | plain    | 12     | 1.0, 12                 | 1.0, 12                 | 12         |

ngram's speedup is 12 / 6 = 2.0, its 16-token pairing, never 12 / 12 = 1.0 across the two versions.
"""

from __future__ import annotations

import math

import pytest
from sqlalchemy import insert

from analysis.intervals import NO_PLAIN
from analysis.summary import summary_frame
from storage.db import open_db
from storage.models import Cell, Experiment, Generation
from storage.summary import Versions
from tests.storage.known import EXPERIMENT, _generation, build


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('known') / 'known.db'}"
    build(url)
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        yield summary_frame(s, EXPERIMENT), summary_frame(s, EXPERIMENT, pooled=True)


def _row(df, strategy, k, regime="uncached", version="current"):
    rows = df[(df["strategy"] == strategy) & (df["k"] == k) & (df["regime"] == regime) & (df["version"] == version)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_intervals_of_a_two_prompt_cell(known):
    means, pooled = known
    ngram = _row(means, "ngram", 2)
    assert (ngram["n_prompts"], ngram["measure"]) == (2, "timed")
    assert (ngram["tokens_per_s_lo"], ngram["tokens_per_s_hi"]) == (10.0, 20.0)  # prompt 1's 10, prompt 0's 20
    assert (ngram["acceptance_lo"], ngram["acceptance_hi"]) == pytest.approx((3 / 14, 0.5))
    assert (ngram["mal_lo"], ngram["mal_hi"]) == pytest.approx((3 / 7, 1.0))
    assert (ngram["first_token_acceptance_lo"], ngram["first_token_acceptance_hi"]) == pytest.approx((3 / 7, 3 / 5))
    assert (ngram["j_per_100_tokens_lo"], ngram["j_per_100_tokens_hi"]) == (400.0, 600.0)
    # paired with plain prompt by prompt: prompt 0 twice 20 / 10 = 2; prompt 1 twice 10 / 2.5 = 4; one of each 2.4
    assert ngram["speedup"] == pytest.approx(2.4)
    assert (ngram["speedup_lo"], ngram["speedup_hi"]) == pytest.approx((2.0, 4.0))
    # plain over ngram J/100: prompt 0 twice 1000 / 400 = 2.5, prompt 1 twice 3000 / 600 = 5
    assert (ngram["energy_ratio_lo"], ngram["energy_ratio_hi"]) == pytest.approx((2.5, 5.0))
    assert ngram["note"] is None
    p = _row(pooled, "ngram", 2)
    # pooled acceptance: prompt 0 twice 10 / 20 = 0.5, prompt 1 twice 6 / 28 = 3 / 14
    assert (p["acceptance_lo"], p["acceptance_hi"]) == pytest.approx((3 / 14, 0.5))
    # pooled speedup: (20 tokens / 1 s) / (20 / 2 s) = 2 for prompt 0 twice, (20 / 2) / (20 / 8) = 4 for prompt 1
    assert (p["speedup_lo"], p["speedup_hi"]) == pytest.approx((2.0, 4.0))


def test_plain_is_one_against_itself_and_one_prompt_has_no_interval(known):
    means, _ = known
    plain = _row(means, "plain", 0)
    assert (plain["speedup"], plain["speedup_lo"], plain["speedup_hi"]) == (1.0, 1.0, 1.0)
    one = _row(means, "ngram", 3)  # prompt 0 only
    assert one["n_prompts"] == 1 and one["speedup"] == pytest.approx(1.25)  # 12.5 / plain's prompt 0, 10
    assert all(math.isnan(one[f"{m}_{b}"]) for m in ("tokens_per_s", "speedup", "acceptance") for b in ("lo", "hi"))


V1, V2 = {0: (1.0, 2.0), 1: (2.0, 4.0)}, {0: 1.0, 1: 1.0}  # per prompt: (ngram, plain) wall s at 16; plain at 12


def _add(
    conn, exp_id: int, strategy: str, prompt: int, n: int, wall_s: float, key: str, measure: str = "timed"
) -> None:
    draft, k = (strategy, 0) if strategy == "plain" else (strategy, 2)
    row = (strategy, draft, k, "uncached", prompt, n, [1] * (n // 2) if k else [0] * n, n if k else 0, 0, wall_s, 10.0)
    cell_id = conn.execute(
        insert(Cell).values(
            experiment_id=exp_id,
            key=f"{key}-{strategy}-{measure}",
            kind="sweep",
            state="done",
            strategy=strategy,
            draft=draft,
            task="t",
            prompt_index=prompt,
            k=k,
            regime="uncached",
            params={},
        )
    ).inserted_primary_key[0]
    conn.execute(
        insert(Generation).values(**{**_generation(cell_id, exp_id, row), "prompt_key": key, "measure": measure})
    )


def _two_versions(url: str, plain_at_16: bool = True) -> None:
    engine, _ = open_db(url)
    with engine.begin() as conn:
        exp_id = conn.execute(insert(Experiment).values(name="v", spec_toml="", spec_hash="")).inserted_primary_key[0]
        for prompt, (ngram_s, plain_s) in V1.items():  # v1: ngram and plain at 16 tokens
            _add(conn, exp_id, "ngram", prompt, 16, ngram_s, f"k16-{prompt}")
            if plain_at_16:
                _add(conn, exp_id, "plain", prompt, 16, plain_s, f"k16-{prompt}")
        for prompt, plain_s in V2.items():  # v2: plain alone at 12 tokens
            _add(conn, exp_id, "plain", prompt, 12, plain_s, f"k12-{prompt}")
    engine.dispose()


def test_a_speedup_is_never_divided_across_two_spec_versions(db_url):
    """On SQLite and PostgreSQL: the prompt keys split plain's cell into two versions (one read per version)."""
    url = db_url
    _two_versions(url)
    _, Session = open_db(url, migrate=False)
    current = Versions(strategies=frozenset({"plain"}), older=frozenset({"k16-0", "k16-1"}))
    by_strategy = Versions(strategies=frozenset({"plain"}))  # versions that never split a cell: one GROUP BY
    with Session() as s:
        unknown, marked = summary_frame(s, "v"), summary_frame(s, "v", versions=current)
        assert set(zip(*summary_frame(s, "v", versions=by_strategy)[["strategy", "version"]].T.values)) == {
            ("ngram", "older"),
            ("plain", "current"),
        }
    # without the spec to tell versions apart: the newest generation of each coordinate and prompt
    ngram = unknown[unknown["strategy"] == "ngram"].iloc[0]
    assert ngram["tokens_per_s"] == pytest.approx(12.0)  # (16 + 8) / 2
    assert ngram["speedup"] == pytest.approx(2.0)  # (16 + 8) / (8 + 4): its own 16-token plain, not 12 / 12
    assert (ngram["speedup_lo"], ngram["speedup_hi"]) == pytest.approx((2.0, 2.0))  # 2x on both prompts
    assert unknown[unknown["strategy"] == "plain"].iloc[0]["tokens_per_s"] == pytest.approx(12.0)  # plain's newest
    # with it: ngram and the 16-token plain are an older version, the 12-token plain the current one
    assert set(zip(marked["strategy"], marked["version"])) == {
        ("ngram", "older"),
        ("plain", "older"),
        ("plain", "current"),
    }
    old = _row(marked, "ngram", 2, version="older")
    assert old["speedup"] == pytest.approx(2.0) and old["note"] is None
    assert _row(marked, "plain", 0, version="older")["tokens_per_s"] == pytest.approx(6.0)  # (8 + 4) / 2
    assert _row(marked, "plain", 0)["tokens_per_s"] == pytest.approx(12.0)


def test_a_cell_without_a_plain_of_its_version_has_no_speedup_and_says_why(tmp_path):
    url = f"sqlite:///{tmp_path / 'v.db'}"
    _two_versions(url, plain_at_16=False)  # plain ran at 12 tokens only
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        df = summary_frame(s, "v")
    ngram = df[df["strategy"] == "ngram"].iloc[0]
    assert math.isnan(ngram["speedup"]) and math.isnan(ngram["speedup_lo"]) and math.isnan(ngram["energy_ratio"])
    assert ngram["note"] == f"no speedup: {NO_PLAIN}"
    assert ngram["tokens_per_s"] == pytest.approx(12.0)  # its own figures stay


def test_a_replayed_row_is_paired_only_with_replayed_plain(tmp_path):
    """ngram replayed (predicted 16 tokens in 0.5 s: 32 tok/s) beside the timed v1 rows: its own row, and no speedup
    until plain is replayed too (a predicted time over a measured one is no speedup)."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    _two_versions(url)
    engine, Session = open_db(url, migrate=False)
    with engine.begin() as conn:
        for prompt in V1:
            _add(conn, 1, "ngram", prompt, 16, 0.5, f"k16-{prompt}", measure="replay")
    with Session() as s:
        df = summary_frame(s, "v")
    replayed = df[(df["strategy"] == "ngram") & (df["measure"] == "replay")].iloc[0]
    assert replayed["tokens_per_s"] == pytest.approx(32.0) and math.isnan(replayed["speedup"])
    no_error = "replayed speed: no validated model error for uncached k 2-4 (or its plain): no interval"
    assert replayed["note"] == f"no speedup: {NO_PLAIN}; {no_error}"  # and no timed twin validates it
    timed = df[(df["strategy"] == "ngram") & (df["measure"] == "timed")].iloc[0]
    assert timed["speedup"] == pytest.approx(2.0)  # untouched by the replayed row
    with engine.begin() as conn:
        for prompt in V1:
            _add(conn, 1, "plain", prompt, 16, 1.0, f"k16-{prompt}", measure="replay")
    with Session() as s:
        df = summary_frame(s, "v")
    replayed = df[(df["strategy"] == "ngram") & (df["measure"] == "replay")].iloc[0]
    assert replayed["speedup"] == pytest.approx(2.0)  # 32 / 16, both predicted
    engine.dispose()
