"""`timing_spread` (how far apart the timed runs of one generation were, `[sweep] repeats`) and `identical_pass_noise`
(how far apart cells that did the same verifier work were), worked out by hand.

| gen | wall_s_runs      | slowest / fastest - 1 |
|-----|------------------|-----------------------|
| p   | 2.0, 2.2         | 0.1                   |
| c   | 1.0, 1.5         | 0.5                   |
| d   | 1.2, 1.0, 1.1    | 0.2                   |
| e   | 1.0, 1.0         | 0.0                   |
| a   | 1.0 (one run)    | (not counted)         |
| b   | NULL (old rows)  | (not counted)         |

Sorted spreads 0, 0.1, 0.2, 0.5: median (0.1 + 0.2) / 2 = 0.15; 90th percentile at position 0.9 x 3 = 2.7, i.e.
0.2 + 0.7 x (0.5 - 0.2) = 0.41 (linear, as pandas). Runs: at most 3.
"""

from __future__ import annotations

import math

import pytest
from sqlalchemy import insert

from storage.db import open_db
from storage.models import Cell, Experiment, Generation
from storage.queries import identical_pass_noise, timing_spread
from tests.storage.test_summary_edges import ROWS, _generation

RUNS = {"p": [2.0, 2.2], "c": [1.0, 1.5], "d": [1.2, 1.0, 1.1], "e": [1.0, 1.0], "a": [1.0], "b": None}


def test_timing_spread_by_hand(tmp_path):
    engine, Session = open_db(f"sqlite:///{tmp_path / 't.db'}")
    with engine.begin() as conn:
        ids = [
            conn.execute(insert(Experiment).values(name=n, spec_toml="", spec_hash="")).inserted_primary_key[0]
            for n in ("timed", "once")
        ]
        for name, runs in RUNS.items():
            k, prompt = ROWS[name][:2]
            for exp_id in ids:
                cell_id = conn.execute(
                    insert(Cell).values(
                        experiment_id=exp_id,
                        key=name,
                        kind="sweep",
                        state="done",
                        strategy="s",
                        draft="ngram",
                        task="t",
                        prompt_index=prompt,
                        k=k,
                        regime="uncached",
                        params={},
                    )
                ).inserted_primary_key[0]
                row = _generation(name, cell_id, exp_id)
                conn.execute(
                    insert(Generation).values(**row, wall_s_runs=runs if exp_id == ids[0] else [row["wall_s"]])
                )
    with Session() as s:
        got = timing_spread(s, ids[0])
        assert got == {"generations": 4, "runs": 3, "median": pytest.approx(0.15), "p90": pytest.approx(0.41)}
        assert timing_spread(s, ids[1]) is None  # one run each: nothing to compare
        assert timing_spread(s, None) is None  # no experiment
    engine.dispose()


def test_identical_pass_noise_by_hand(tmp_path):
    """Groups of generations with the same prompt, regime, k and passes, verifier time = wall_s - draft_s:

    | group | verifier times (s)            | ln                      | mean | squares about the mean |
    |-------|-------------------------------|-------------------------|------|------------------------|
    | A     | 1, e^0.2 (wall e^0.2 + 0.5, draft 0.5) | 0, 0.2          | 0.1  | 0.01 + 0.01 = 0.02     |
    | B     | 1, e^0.3, e^0.6               | 0, 0.3, 0.6             | 0.3  | 0.09 + 0 + 0.09 = 0.18 |

    Pooled variance (0.02 + 0.18) / (1 + 2) = 1/15; sd = sqrt(1/15) = 0.258199. Left out: a generation with other
    passes, one at another k with the same passes, and one on another prompt (each alone in its group).
    """
    engine, Session = open_db(f"sqlite:///{tmp_path / 'n.db'}")
    e = math.e
    rows = [  # (prompt, k, tokens_per_step, accepted_per_step, wall_s, draft_s)
        (0, 8, [3, 1], [2, 0], 1.0, 0.0),
        (0, 8, [3, 1], [2, 0], e**0.2 + 0.5, 0.5),  # A
        (1, 8, [2, 2], [1, 1], 1.0, 0.0),
        (1, 8, [2, 2], [1, 1], e**0.3, 0.0),
        (1, 8, [2, 2], [1, 1], e**0.6, 0.0),  # B
        (1, 8, [2, 1, 1], [1, 0, 0], 5.0, 0.0),  # other passes
        (1, 3, [2, 2], [1, 1], 7.0, 0.0),  # another k
        (2, 8, [3, 1], [2, 0], 9.0, 0.0),  # another prompt
    ]
    with engine.begin() as conn:
        exp_id = conn.execute(insert(Experiment).values(name="n", spec_toml="", spec_hash="")).inserted_primary_key[0]
        for i, (prompt, k, per_round, accepted, wall, draft) in enumerate(rows):
            cell_id = conn.execute(
                insert(Cell).values(
                    experiment_id=exp_id,
                    key=f"c{i}",
                    kind="sweep",
                    state="done",
                    strategy=f"s{i}",
                    draft="ngram",
                    task="t",
                    prompt_index=prompt,
                    k=k,
                    regime="cached",
                    params={},
                )
            ).inserted_primary_key[0]
            row = _generation("c", cell_id, exp_id)
            row.update(
                prompt_index=prompt,
                k=k,
                regime="cached",
                tokens_per_step=per_round,
                accepted_per_step=accepted,
                wall_s=wall,
                draft_s=draft,
                strategy=f"s{i}",
            )
            conn.execute(insert(Generation).values(**row))
    with Session() as s:
        got = identical_pass_noise(s, exp_id)
        assert got == {"groups": 2, "generations": 5, "sd": pytest.approx(0.258199, abs=1e-6)}
        assert identical_pass_noise(s, exp_id + 1) is None
    engine.dispose()
