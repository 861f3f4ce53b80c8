"""A tiny database of hand-made generations whose summary numbers are worked out by hand in the tests.

One experiment "known", one task "t". Per generation (n = new tokens, rounds = accepted draft tokens per round):

| id | strategy | k | regime   | prompt | n  | rounds (accepted per round) | hist      | drafted | fp rejects | wall s | energy J |
|----|----------|---|----------|--------|----|-----------------------------|-----------|---------|------------|--------|----------|
| 1  | plain    | 0 | uncached | 0      | 10 | 0 x 10                      | [10]      | 0       | 0          | 1.0    | 100      |
| 2  | plain    | 0 | uncached | 1      | 10 | 0 x 10                      | [10]      | 0       | 0          | 4.0    | 300      |
| 3  | ngram    | 2 | uncached | 0      | 10 | 2,0,2,1,0                   | [2,1,2]   | 10      | 0          | 0.5    | 40       |
| 4  | ngram    | 2 | uncached | 1      | 10 | 1,1,1,0,0,0,0               | [4,3,0]   | 14      | 0          | 1.0    | 60       |
| 5  | ngram    | 3 | uncached | 0      | 10 | 3,3,0,0                     | [2,0,0,2] | 12      | 0          | 0.8    | 80       |
| 6  | plain    | 0 | cached   | 0      | 10 | 0 x 10                      | [10]      | 0       | 0          | 0.5    | 20       |
| 7  | ngram    | 2 | cached   | 0      | 10 | 2,0,0,2,1,0,2               | [3,1,3]   | 12      | 2          | 0.4    | 30       |

(Generation 7: of its three rounds that accepted nothing, two were fast-path rejects and one had an empty draft, so
6 rounds drafted 2 tokens each.)
"""

from __future__ import annotations

from sqlalchemy import insert

from storage.db import open_db
from storage.models import Cell, Experiment, Generation, Reference

EXPERIMENT = "known"
ROWS = [  # strategy, draft, k, regime, prompt, n_tokens, accepted_per_step, drafted, fastpath_rejects, wall_s, energy_j
    ("plain", "plain", 0, "uncached", 0, 10, [0] * 10, 0, 0, 1.0, 100.0),
    ("plain", "plain", 0, "uncached", 1, 10, [0] * 10, 0, 0, 4.0, 300.0),
    ("ngram", "ngram", 2, "uncached", 0, 10, [2, 0, 2, 1, 0], 10, 0, 0.5, 40.0),
    ("ngram", "ngram", 2, "uncached", 1, 10, [1, 1, 1, 0, 0, 0, 0], 14, 0, 1.0, 60.0),
    ("ngram", "ngram", 3, "uncached", 0, 10, [3, 3, 0, 0], 12, 0, 0.8, 80.0),
    ("plain", "plain", 0, "cached", 0, 10, [0] * 10, 0, 0, 0.5, 20.0),
    ("ngram", "ngram", 2, "cached", 0, 10, [2, 0, 0, 2, 1, 0, 2], 12, 2, 0.4, 30.0),
]
TEXTS = {0: "alpha beta gamma delta epsilon", 1: "one two three four five"}


def _generation(cell_id: int, exp_id: int, row) -> dict:
    strategy, draft, k, regime, prompt, n, per_round, drafted, rejects, wall_s, energy_j = row
    accepted = sum(per_round)
    return dict(
        cell_id=cell_id,
        experiment_id=exp_id,
        strategy=strategy,
        draft=draft,
        task="t",
        prompt_index=prompt,
        k=k,
        regime=regime,
        n_prompt_tokens=5,
        n_tokens=n,
        steps=len(per_round) + (regime == "cached"),
        drafted=drafted,
        accepted=accepted,
        acceptance=accepted / drafted if drafted else None,
        mal=0.0,
        accept_hist=[per_round.count(j) for j in range(k + 1)],
        accepted_per_step=per_round,
        tokens_per_step=None,
        fastpath_rejects=rejects,
        wall_s=wall_s,
        draft_s=0.0,
        verify_s=wall_s,
        tokens_per_s=n / wall_s,
        started_at=1000.0 + cell_id,
        ended_at=1000.0 + cell_id + wall_s,
        energy_j=energy_j,
        mean_power_w=energy_j / wall_s,
        j_per_100_tokens=energy_j / n * 100,
        tokens_per_j=n / energy_j,
        power_source="nvml",
        power_measured=True,
        rouge_l=1.0,
        exact_match=not (strategy == "ngram" and prompt == 1),
        bridged=False,
        stopped="max_new_tokens",
        device="test",
        tokens=list(range(n)),
        text=TEXTS[prompt],
    )


def build(url: str) -> None:
    """Create the schema at `url` and store the seven generations above."""
    engine, _ = open_db(url)
    with engine.begin() as conn:
        exp_id = conn.execute(
            insert(Experiment).values(name=EXPERIMENT, spec_toml="", spec_hash="")
        ).inserted_primary_key[0]
        for i, row in enumerate(ROWS):
            strategy, draft, k, regime, prompt = row[:5]
            cell_id = conn.execute(
                insert(Cell).values(
                    experiment_id=exp_id,
                    key=f"s{i}",
                    kind="sweep",
                    state="done",
                    strategy=strategy,
                    draft=draft,
                    task="t",
                    prompt_index=prompt,
                    k=k,
                    regime=regime,
                    params={},
                )
            ).inserted_primary_key[0]
            conn.execute(insert(Generation).values(**_generation(cell_id, exp_id, row)))
        for prompt, text in TEXTS.items():
            cell_id = conn.execute(
                insert(Cell).values(
                    experiment_id=exp_id,
                    key=f"r{prompt}",
                    kind="reference",
                    state="done",
                    task="t",
                    prompt_index=prompt,
                    params={},
                )
            ).inserted_primary_key[0]
            conn.execute(
                insert(Reference).values(
                    cell_id=cell_id,
                    experiment_id=exp_id,
                    task="t",
                    prompt_index=prompt,
                    prompt_text=f"prompt {prompt}",
                    prompt_tokens=[1],
                    tokens=[1, 2],
                    text=text,
                    wall_s=1.0,
                )
            )
        conn.execute(
            insert(Cell).values(
                experiment_id=exp_id,
                key="p",
                kind="sweep",
                state="pending",
                strategy="ngram",
                draft="ngram",
                task="t",
                prompt_index=2,
                k=2,
                regime="cached",
                params={},
            )
        )
    engine.dispose()
