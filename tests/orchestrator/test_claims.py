"""The seed paper's claims, checked on summaries whose verdicts and numbers are worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from orchestrator.claims import (
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
from orchestrator.demo import DEMO_SPEC
from orchestrator.spec import load_spec

OWN = {"olifant-a": "a", "olifant-b": "b"}


def row(strategy, task, regime="uncached", acceptance=0.1, speedup=1.0, fta=None, energy_ratio=None, k=5):
    draft = "plain" if strategy == "plain" else "ngram" if strategy == "ngram" else "olifant"
    return {
        "strategy": strategy,
        "draft": draft,
        "task": task,
        "k": k,
        "regime": regime,
        "acceptance": acceptance,
        "speedup": speedup,
        "first_token_acceptance": fta,
        "energy_ratio": energy_ratio,
        "power_measured": False,
        "prompts": 3,
    }


def test_own_domains_of_the_demo_spec():
    assert own_domains(load_spec(DEMO_SPEC)) == {
        "olifant-shakespeare": "shakespeare",
        "olifant-pydoc": "pydoc",
        "olifant-legal": "legal",
    }  # not the distilled bases
    assert session_4gram(load_spec(DEMO_SPEC)) == "ngram"  # n = 4, no artifact: not lookup, suffix or the hybrids


def test_the_diagonal_needs_the_own_base_strictly_first():
    df = pd.DataFrame(
        [
            row("olifant-a", "a", acceptance=0.30),
            row("olifant-b", "a", acceptance=0.10),
            row("olifant-a", "b", acceptance=0.20),
            row("olifant-b", "b", acceptance=0.20),
        ]
    )
    a, b = domain_diagonal(df, OWN)
    assert (a.task, a.ok, a.detail) == ("a", True, "olifant-a 0.300 vs olifant-b 0.100")
    assert (b.task, b.ok) == ("b", False)  # a tie is not "most"


def test_acceptance_is_pooled_over_k():
    df = pd.DataFrame(
        [
            row("olifant-a", "a", acceptance=0.1, k=3),
            row("olifant-a", "a", acceptance=0.3, k=8),
            row("olifant-b", "a", acceptance=0.19),
        ]
    )
    (a,) = [c for c in domain_diagonal(df, OWN) if c.task == "a"]
    assert a.ok and a.detail.startswith("olifant-a 0.200")


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
    assert not a.ok and a.detail == "acceptance 0.300 vs 0.200; speedup 1.20 vs 1.30"
    assert b.ok


def test_uncached_speedup_above_one_says_when_within_noise():
    df = pd.DataFrame(
        [
            row("olifant-a", "a", speedup=1.03),
            row("olifant-b", "b", speedup=0.9),
            row("olifant-b", "b", speedup=1.5, regime="cached"),
        ]
    )  # another regime does not count
    a, b = uncached_speedups(df, OWN, noise=0.05)
    assert a.ok and a.detail == "1.03x (within the 5% timing noise of 1)"
    assert not b.ok and b.detail == "0.90x"


def test_break_even_is_where_the_line_crosses_one():
    # speedup = 0.6 + 2 x acceptance: crosses 1 at 0.20
    pts = [row("s", "a", regime="cached", fta=f, speedup=0.6 + 2 * f) for f in (0.1, 0.2, 0.3, 0.5)]
    pts.append(row("plain", "a", regime="cached", speedup=3.0, fta=0.0, k=0))  # plain (k = 0) is left out
    check = cached_break_even(pd.DataFrame(pts))
    assert check.ok and check.detail.startswith("line crosses 1.0 at 0.20 (speedup = 0.60 + 2.00 x acceptance)")
    assert "3 of 4 cells at speedup >= 1, the lowest first-token acceptance among them 0.20" in check.detail
    far = cached_break_even(
        pd.DataFrame([row("s", "a", regime="cached", fta=f, speedup=0.2 + f) for f in (0.1, 0.3, 0.5)])
    )
    assert not far.ok and "crosses 1.0 at 0.80" in far.detail and "none of 3 cells reached 1" in far.detail


def test_break_even_refuses_a_flat_or_falling_line():
    check = cached_break_even(
        pd.DataFrame([row("s", "a", regime="cached", fta=f, speedup=1 - f) for f in (0.1, 0.2, 0.3)])
    )
    assert not check.ok and "does not rise" in check.detail


@pytest.mark.parametrize("ratios, ok", [((1.0, 1.5, 2.0), True), ((1.0, 1.2, 2.6), False), ((2.0, 1.5, 1.0), False)])
def test_energy_tracks_speedup(ratios, ok):
    df = pd.DataFrame([row("s", "a", speedup=s, energy_ratio=e) for s, e in zip((1.0, 1.5, 2.0), ratios)])
    check = energy_tracks_speedup(df)
    assert check.ok is ok and "over 3 cells (estimated power)" in check.detail


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
    assert all(c.ok for c in checks)
    table = claims_table(checks)
    assert "| holds " in table and "does not hold" not in table
