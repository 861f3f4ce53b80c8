"""`timing_spread` (how far apart the timed runs of one generation were, `[sweep] repeats`) and `identical_pass_noise`
(the run's timing noise from generations timed twice: |t2 / t1 - 1| / sqrt 2), worked out by hand.

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
from tests.analysis.test_summary_edges import ROWS, _generation

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
        # the noise on purpose: |t2 / t1 - 1| / sqrt 2 of p, c, d, e = 0.1, 0.5, 1/6, 0 over sqrt 2; median of the
        # middle two (0.1 + 1/6) / 2, over sqrt 2
        noise = identical_pass_noise(s, ids[0])
        assert noise == {"groups": 4, "generations": 4, "sd": pytest.approx((0.1 + 1 / 6) / 2 / math.sqrt(2))}
        assert identical_pass_noise(s, ids[1]) is None
    engine.dispose()
