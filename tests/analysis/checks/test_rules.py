"""The verdict rules (`analysis.checks.rules`) and the families' Holm correction
(`analysis.checks.families`) on figures and p-values worked out by hand."""

from __future__ import annotations

import math

import pytest

from analysis.checks.check import Check
from analysis.checks.families import families_text, holm
from analysis.checks.rules import PRACTICAL_MARGIN, all_of, judge, margin_for
from analysis.stats import BY_CONSTRUCTION, FAILS, HOLDS, INCONCLUSIVE, TIE, Estimate


def est(value, lo, hi, n=20):
    return Estimate(value, lo, hi, n)


@pytest.mark.parametrize(
    "e, side, want",
    [
        (est(0.10, 0.05, 0.15), ">", HOLDS),  # wholly above +0.02
        (est(0.03, 0.01, 0.05), ">", INCONCLUSIVE),  # above 0, not wholly beyond the margin
        (est(-0.10, -0.15, 0.01), ">", FAILS),  # nowhere beyond +0.02: A does not beat B
        (est(0.0024, 0.0003, 0.0048), ">", TIE),  # the issue's +0.00 [+0.00, +0.00]: within +-0.02
        (est(0.0024, 0.0003, 0.0048), ">=", TIE),  # a tie, never ">= holds" (nor "beats")
        (est(0.01, -0.01, 0.05), ">=", HOLDS),  # not slower by more than 0.02, and no tie
        (est(-0.05, -0.08, -0.03), ">=", FAILS),  # slower beyond the margin
        (est(-0.01, -0.04, 0.05), ">=", INCONCLUSIVE),
        (est(-0.10, -0.15, -0.05), "<", HOLDS),  # the mirror image of "> "
        (est(0.10, 0.05, 0.15, n=9), ">", INCONCLUSIVE),  # too few prompts
        (est(0.10, math.nan, math.nan), ">", INCONCLUSIVE),
    ],
)
def test_judge_with_a_two_percent_margin(e, side, want):
    assert judge(e, 0.0, side, margin=0.02).verdict == want


def test_a_zero_margin_ties_only_on_exactly_zero():
    assert judge(est(0.0, 0.0, 0.0), 0.0, ">").verdict == TIE  # the same acceptance on every prompt
    assert judge(est(0.1, 0.0, 0.2), 0.0, ">=").verdict == HOLDS  # as before the margins
    assert judge(est(0.1, 0.0, 0.2), 0.0, ">").verdict == INCONCLUSIVE


def test_p_is_below_the_tail_exactly_where_the_interval_decides():
    """p reads each half of the interval as 1.96 standard errors: a bound at the interval's edge has p = 2.5%; one
    at twice the half-width from the estimate, p = P(Z > 3.92)."""
    assert judge(est(0.10, 0.05, 0.15), 0.05, ">=").p == pytest.approx(0.025)  # lo on the bound of ">="
    holds = judge(est(0.10, 0.05, 0.15), 0.0, ">")
    assert holds.verdict == HOLDS and holds.p == pytest.approx(4.43e-5, rel=0.01)
    fails = judge(est(-0.10, -0.15, -0.05), 0.0, ">")
    assert fails.verdict == FAILS and fails.p == pytest.approx(holds.p)
    assert math.isnan(judge(est(0.0, -0.1, 0.1), 0.0, ">").p)


def test_margins_are_relative_and_exact_figures_have_none():
    assert margin_for("speedup", 1.5, "cached") == pytest.approx(1.5 * PRACTICAL_MARGIN)
    assert margin_for("speedup", 1.5, "cached", {"cached": 0.10}) == pytest.approx(1.5 * 0.12)
    assert margin_for("speedup", 1.5, "uncached", {"cached": 0.10}) == pytest.approx(0.03)
    assert margin_for("acceptance", 0.4, "cached", {"cached": 0.10}) == 0.0


def test_all_of_several_claims():
    h, f, t, i = ((v, p) for v, p in ((HOLDS, 0.01), (FAILS, 0.002), (TIE, 0.0), (INCONCLUSIVE, math.nan)))
    j = lambda *xs: all_of([type("J", (), {"verdict": v, "p": p})() for v, p in xs])  # noqa: E731
    assert j(h, h).verdict == HOLDS and j(h, h).p == 0.01
    assert j(h, f, i).verdict == FAILS and j(h, f).p == 0.002
    assert j(h, t).verdict == TIE and j(h, i).verdict == INCONCLUSIVE and all_of([]).verdict == INCONCLUSIVE


def check(p, verdict=HOLDS, target="t", task="x"):
    return Check(target, task, "uncached", verdict, "d", p=p)


def test_holm_keeps_a_family_whose_p_clear_their_steps():
    """Three verdicts, p 0.001, 0.01, 0.02: against 0.025/3, 0.025/2 and 0.025: all stand."""
    out = holm([check(0.02), check(0.001), check(0.01)])
    assert [c.verdict for c in out] == [HOLDS] * 3 and {c.family_size for c in out} == {3}


def test_holm_stops_at_the_first_p_over_its_step():
    """p 0.005, 0.015, 0.02 (each decisive at 95% alone): 0.005 <= 0.025/3 stands; 0.015 > 0.025/2 does not, nor
    anything after it; an inconclusive member counts in m."""
    out = holm([check(0.02, FAILS), check(0.005), check(0.015), check(math.nan, INCONCLUSIVE)])
    assert [c.verdict for c in out] == [INCONCLUSIVE, HOLDS, INCONCLUSIVE, INCONCLUSIVE]
    assert (
        out[0].before == FAILS and "not after Holm (p 0.02 > 0.013, family of 4)" in out[0].detail
    )  # its step: 0.025 / 2
    assert out[1].detail == "d"
    text = families_text(out)
    assert "- t: 4 verdicts, Holm-Bonferroni at one-sided 2.5% family-wise; 1 holds, 3 inconclusive" in text
    assert "(2 decisive at 95% alone made inconclusive)" in text


def test_families_are_per_target_and_skip_what_is_no_test():
    out = holm([check(0.02, target="a"), check(0.02, target="b"), check(math.nan, BY_CONSTRUCTION, target="b")])
    assert [c.verdict for c in out] == [HOLDS, HOLDS, BY_CONSTRUCTION]  # two families of one
    assert families_text(out) == ""
    tie = holm([check(0.0, TIE), check(0.001, FAILS)])
    assert [c.verdict for c in tie] == [TIE, FAILS]
