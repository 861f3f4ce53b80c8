"""The seed paper's claims, checked on summaries whose verdicts and numbers are worked out by hand: every figure
carries the interval [value - W, value + W] unless a test says otherwise, and each claim's three outcomes (holds,
does not hold, inconclusive) are tried."""

from __future__ import annotations

import pandas as pd
import pytest

from orchestrator.checks.claims import (
    beats_ngram,
    cached_break_even,
    check_claims,
    claims_table,
    domain_diagonal,
    energy_tracks_speedup,
    own_domains,
    session_4gram,
    uncached_speedups,
)
from orchestrator.cli.demo import DEMO_SPEC
from orchestrator.run.spec_paths import load_spec
from storage.stats import FAILS, HOLDS, INCONCLUSIVE

OWN = {"olifant-a": "a", "olifant-b": "b"}
W = 0.02


# one keyword per summary column a claim reads, so each test names only the figures it sets
def row(strategy, task, regime="uncached", acceptance=0.1, speedup=1.0, fta=None, energy_ratio=None, k=5, width=W):
    draft = "plain" if strategy == "plain" else "ngram" if strategy == "ngram" else "olifant"
    return {
        "strategy": strategy,
        "draft": draft,
        "task": task,
        "k": k,
        "regime": regime,
        "acceptance": acceptance,
        "acceptance_lo": acceptance - width,
        "acceptance_hi": acceptance + width,
        "speedup": speedup,
        "speedup_lo": speedup - width,
        "speedup_hi": speedup + width,
        "first_token_acceptance": fta,
        "energy_ratio": energy_ratio,
        "power_measured": False,
        "prompts": 3,
        "n_prompts": 3,
    }


def test_own_domains_of_the_demo_spec():
    assert own_domains(load_spec(DEMO_SPEC)) == {
        "olifant-shakespeare": "shakespeare",
        "olifant-pydoc": "pydoc",
        "olifant-legal": "legal",
    }  # not the distilled bases
    assert session_4gram(load_spec(DEMO_SPEC)) == "ngram"  # n = 4, no artifact: not lookup, suffix or the hybrids


def test_the_diagonal_needs_the_own_base_first_beyond_its_interval():
    df = pd.DataFrame(
        [
            row("olifant-a", "a", acceptance=0.30),
            row("olifant-b", "a", acceptance=0.10),
            row("olifant-a", "b", acceptance=0.20),
            row("olifant-b", "b", acceptance=0.20),
        ]
    )
    a, b = domain_diagonal(df, OWN)
    assert (a.task, a.verdict) == ("a", HOLDS)
    assert a.detail == (
        "olifant-a vs olifant-b: 0.30 [0.28, 0.32], 3 prompts vs 0.10 [0.08, 0.12], 3 prompts; "
        "difference +0.20 [+0.16, +0.24] (from the cells' intervals, 3 prompts)"
    )
    assert (b.task, b.verdict) == ("b", INCONCLUSIVE)  # a tie is not "most", nor its opposite
    df.loc[2, ["acceptance", "acceptance_lo", "acceptance_hi"]] = (0.4, 0.38, 0.42)
    assert domain_diagonal(df, OWN)[1].verdict == FAILS  # olifant-a accepts more on b's own domain


def test_acceptance_is_over_k():
    df = pd.DataFrame(
        [
            row("olifant-a", "a", acceptance=0.1, k=3),
            row("olifant-a", "a", acceptance=0.3, k=8),
            row("olifant-b", "a", acceptance=0.15),
        ]
    )
    (a,) = [c for c in domain_diagonal(df, OWN) if c.task == "a"]
    assert a.verdict == HOLDS and a.detail.startswith("olifant-a vs olifant-b: 0.20 [0.18, 0.22]")  # (0.1 + 0.3) / 2


def test_beating_ngram_needs_acceptance_and_speed():
    df = pd.DataFrame(
        [
            row("olifant-a", "a", acceptance=0.3, speedup=1.2),
            row("ngram", "a", acceptance=0.2, speedup=1.3),
            row("olifant-b", "b", acceptance=0.3, speedup=1.4),
            row("ngram", "b", acceptance=0.2, speedup=1.3),
        ]
    )
    a, b = beats_ngram(df, OWN, "ngram")
    assert a.verdict == FAILS and "speedup k=5 vs" not in a.detail  # accepts more, but slower: does not hold
    assert a.detail.startswith("acceptance 0.30 [0.28, 0.32], 3 prompts vs 0.20") and "-0.10 [-0.14, -0.06]" in a.detail
    assert b.verdict == HOLDS


def test_beating_ngram_paired_over_prompts():
    """Per prompt (plain 10 tok/s, 10 drafted): olifant-a accepts 6 and 4, ngram 2 and 3 (differences 0.4, 0.1);
    olifant-a runs 14 and 12 tok/s, ngram 12 and 13 (speedup differences +0.2, -0.1): acceptance holds, speed is
    inconclusive, so the claim is."""
    from tests.orchestrator.checks.test_targets import prompts_frame

    df = pd.DataFrame(
        [row("olifant-a", "a", acceptance=0.5, speedup=1.3), row("ngram", "a", acceptance=0.25, speedup=1.25)]
    )
    prompts = prompts_frame(
        {
            ("olifant-a", "a", 5, "uncached"): [(14.0, 10.0, 6, 10), (12.0, 10.0, 4, 10)],
            ("ngram", "a", 5, "uncached"): [(12.0, 10.0, 2, 10), (13.0, 10.0, 3, 10)],
        }
    )
    (a,) = beats_ngram(df, {"olifant-a": "a"}, "ngram", prompts)
    assert a.verdict == INCONCLUSIVE
    assert "+0.25 [+0.10, +0.40] (paired, 2 prompts)" in a.detail and "+0.05 [-0.10, +0.20] (paired" in a.detail


@pytest.mark.parametrize("speedup,want", [(1.03, HOLDS), (0.9, FAILS), (1.01, INCONCLUSIVE)])
def test_uncached_speedup_above_one(speedup, want):
    df = pd.DataFrame(
        [row("olifant-a", "a", speedup=speedup), row("olifant-a", "a", speedup=3.0, regime="cached")]
    )  # another regime does not count
    (a,) = uncached_speedups(df, {"olifant-a": "a"})
    assert a.verdict == want
    assert a.detail == f"k=5: {speedup:.2f}x [{speedup - W:.2f}, {speedup + W:.2f}], 3 prompts"


def test_break_even_is_where_the_line_crosses_one():
    # speedup = 0.6 + 2 x acceptance: crosses 1 at 0.20, on every resample of the cells that has a line
    pts = [row("s", "a", regime="cached", fta=f, speedup=0.6 + 2 * f) for f in (0.1, 0.2, 0.3, 0.5)]
    pts.append(row("plain", "a", regime="cached", speedup=3.0, fta=0.0, k=0))  # plain (k = 0) is left out
    check = cached_break_even(pd.DataFrame(pts))
    assert check.verdict == HOLDS
    assert check.detail.startswith("line crosses 1.0 at 0.20 [0.20, 0.20] (speedup = 0.60 + 2.00 x acceptance")
    assert "3 of 4 cells at speedup >= 1, the lowest first-token acceptance among them 0.20" in check.detail
    far = cached_break_even(
        pd.DataFrame([row("s", "a", regime="cached", fta=f, speedup=0.2 + f) for f in (0.1, 0.3, 0.5)])
    )
    assert far.verdict == FAILS and "crosses 1.0 at 0.80" in far.detail and "none of 3 cells reached 1" in far.detail
    # cells off the line: resampled, the crossing spans 0.2 to 0.5, partly outside 15-30%
    loose = cached_break_even(
        pd.DataFrame(
            [row("s", "a", regime="cached", fta=f, speedup=s) for f, s in ((0.1, 0.8), (0.3, 1.1), (0.5, 1.0))]
        )
    )
    assert loose.verdict == INCONCLUSIVE


def test_break_even_refuses_a_flat_or_falling_line():
    check = cached_break_even(
        pd.DataFrame([row("s", "a", regime="cached", fta=f, speedup=1 - f) for f in (0.1, 0.2, 0.3)])
    )
    assert check.verdict == FAILS and "does not rise" in check.detail


@pytest.mark.parametrize(
    "ratios, want",
    [
        ((1.0, 1.5, 2.0), HOLDS),  # equal to the speedups: r = 1, no deviation, on every resample
        ((1.0, 1.2, 2.6), INCONCLUSIVE),  # r > 0.9 throughout, but the median deviation runs from 0 to 30%
        ((2.0, 1.5, 1.0), FAILS),  # anti-correlated
    ],
)
def test_energy_tracks_speedup(ratios, want):
    df = pd.DataFrame([row("s", "a", speedup=s, energy_ratio=e) for s, e in zip((1.0, 1.5, 2.0), ratios)])
    check = energy_tracks_speedup(df)
    assert check.verdict == want and "over 3 cells (estimated power)" in check.detail


def test_check_claims_and_its_table():
    df = pd.DataFrame(
        [
            row("olifant-a", "a", acceptance=0.3, speedup=1.2, energy_ratio=1.2),
            row("olifant-b", "a", acceptance=0.1, speedup=0.9, energy_ratio=0.9),
            row("olifant-a", "b", acceptance=0.1, speedup=0.95, energy_ratio=0.95),
            row("olifant-b", "b", acceptance=0.4, speedup=1.3, energy_ratio=1.3),
        ]
        + [row("olifant-a", "a", regime="cached", fta=f, speedup=0.5 + 2.5 * f) for f in (0.1, 0.3, 0.5)]
    )
    checks = check_claims(df, OWN)  # no session 4-gram in this run: that claim is left out
    assert [c.target for c in checks] == ["domain diagonal: own base accepts most"] * 2 + [
        "olifant-a uncached speedup > 1",
        "olifant-b uncached speedup > 1",
        "cached break-even near 20-25% first-token acceptance",
        "uncached energy ratio tracks speedup",
    ]
    assert all(c.verdict == HOLDS for c in checks), claims_table(checks)
    table = claims_table(checks)
    assert "| holds " in table and "does not hold" not in table and "inconclusive" not in table
