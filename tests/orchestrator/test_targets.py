"""The future-work targets as checks over a summary frame (the demo prints them; the README reports them)."""

from __future__ import annotations

import pandas as pd

from orchestrator.targets import (
    adaptive_speedup,
    check_all,
    checks_table,
    distilled_acceptance,
    exact_match,
    hybrid_speedup,
)


def frame(rows):
    cols = ["strategy", "task", "k", "regime", "speedup", "acceptance", "exact_match"]
    return pd.DataFrame(rows, columns=cols)


def grid(strategy, task, speedups, acceptances, regime="uncached", ks=(3, 5, 8)):
    return [(strategy, task, k, regime, s, a, 1.0) for k, s, a in zip(ks, speedups, acceptances)]


def test_distilled_must_win_at_every_k_and_regime():
    rows = grid("olifant-x", "x", [1.1] * 3, [0.1, 0.1, 0.1]) + grid("distilled-x", "x", [1.2] * 3, [0.3, 0.2, 0.1])
    (check,) = distilled_acceptance(frame(rows), "x")
    assert not check.ok and "k=8: 0.10 vs 0.10" in check.detail       # a tie at k=8 is not higher
    rows[-1] = ("distilled-x", "x", 8, "uncached", 1.2, 0.11, 1.0)
    assert distilled_acceptance(frame(rows), "x")[0].ok


def test_hybrid_against_its_parts_and_plain():
    rows = (grid("olifant-x", "x", [1.1, 1.2, 1.0], [0.1] * 3) + grid("ngram", "x", [1.5, 1.8, 1.7], [0.3] * 3)
            + grid("hybrid-x", "x", [1.6, 1.75, 1.7], [0.35] * 3)
            + grid("hybrid-x", "x", [1.0, 0.97, 0.9], [0.35] * 3, regime="cached"))
    checks = {c.regime: c for c in hybrid_speedup(frame(rows), "x", noise=0.05)}
    assert checks["uncached"].ok                                   # 1.75 >= 1.8 within 5%
    assert not checks["cached"].ok and "0.90" in checks["cached"].detail
    assert not hybrid_speedup(frame(rows), "x", noise=0.0)[0].ok


def test_adaptive_against_the_best_fixed_k():
    rows = grid("hybrid-x", "x", [1.2, 1.5, 1.4], [0.3] * 3) + [("hybrid-x-adaptive", "x", 8, "uncached", 1.46, 0.5, 1.0)]
    (check,) = adaptive_speedup(frame(rows), "hybrid-x", "hybrid-x-adaptive")
    assert check.ok and check.detail == "1.46 vs 1.50"
    rows[-1] = ("hybrid-x-adaptive", "x", 8, "uncached", 1.3, 0.5, 1.0)
    assert not adaptive_speedup(frame(rows), "hybrid-x", "hybrid-x-adaptive")[0].ok


def test_exact_match_and_the_table():
    rows = grid("ngram", "x", [1.5] * 3, [0.3] * 3)
    assert exact_match(frame(rows))[0].ok
    rows[0] = ("ngram", "x", 3, "uncached", 1.5, 0.3, 0.75)
    assert exact_match(frame(rows))[0].detail == "ngram"
    table = checks_table(check_all(frame(rows), []))
    assert "exact match 1.0" in table and "False" in table
