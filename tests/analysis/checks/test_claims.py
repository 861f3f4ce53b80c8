"""The seed paper's claims, checked on summaries whose verdicts and numbers are worked out by hand: every figure
carries the interval [value - W, value + W] over N prompts unless a test says otherwise, and each claim's outcomes
(holds, does not hold, inconclusive, and tie or "not testable here" where the claim has them) are tried. The
break-even's interval is worked out from per-prompt frames: prompts with equal figures give a zero-width interval,
and a factor shared by every cell of a task moves them together."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.checks.claims import (
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
from analysis.stats import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, TIE
from orchestrator.cli.demo import DEMO_SPEC
from orchestrator.run.spec_paths import load_spec

OWN = {"olifant-a": "a", "olifant-b": "b"}
W = 0.02
N = 20  # prompts behind every hand-made figure: a verdict needs at least 10


# one keyword per summary column a claim reads, so each test names only the figures it sets
def row(
    strategy, task, regime="uncached", acceptance=0.1, speedup=1.0, fta=None, energy_ratio=None, k=5, width=W, **more
):
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
        "prompts": N,
        "n_prompts": N,
    } | more


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
        "olifant-a vs olifant-b: 0.30 [0.28, 0.32], 20 prompts vs 0.10 [0.08, 0.12], 20 prompts; "
        "difference +0.20 [+0.16, +0.24] (from the cells' intervals, 20 prompts)"
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
    assert (
        a.detail.startswith("acceptance 0.30 [0.28, 0.32], 20 prompts vs 0.20") and "-0.10 [-0.14, -0.06]" in a.detail
    )
    assert b.verdict == HOLDS


def test_beating_ngram_paired_over_prompts():
    """Ten prompts, two patterns five times (plain 10 tok/s, 10 drafted): olifant-a accepts 6 and 4, ngram 2 and 3
    (differences 0.4, 0.1); olifant-a runs 14 and 12 tok/s, ngram 12 and 13 (speedup differences +0.2, -0.1, mean
    +0.05 beside a margin of 2% of 1.25x): acceptance holds, speed is inconclusive, so the claim is."""
    from tests.analysis.checks.test_targets import prompts_frame

    df = pd.DataFrame(
        [row("olifant-a", "a", acceptance=0.5, speedup=1.3), row("ngram", "a", acceptance=0.25, speedup=1.25)]
    )
    prompts = prompts_frame(
        {
            ("olifant-a", "a", 5, "uncached"): [(14.0, 10.0, 6, 10), (12.0, 10.0, 4, 10)] * 5,
            ("ngram", "a", 5, "uncached"): [(12.0, 10.0, 2, 10), (13.0, 10.0, 3, 10)] * 5,
        }
    )
    (a,) = beats_ngram(df, {"olifant-a": "a"}, "ngram", prompts)
    assert a.verdict == INCONCLUSIVE
    assert "difference +0.25 [+0.1" in a.detail and "(paired, 10 prompts); speedup" in a.detail
    assert "difference +0.05 [-0.0" in a.detail and "(paired; margin 0.03, 10 prompts)" in a.detail


@pytest.mark.parametrize(
    "speedup,want",
    [
        (1.05, HOLDS),  # [1.03, 1.07]: above 1 + 2%
        (0.9, FAILS),  # [0.88, 0.92]
        (1.03, INCONCLUSIVE),  # [1.01, 1.05]: above 1, but not wholly beyond the margin
        (1.0, TIE),  # [0.98, 1.02]: within 2% of plain
    ],
)
def test_uncached_speedup_above_one(speedup, want):
    df = pd.DataFrame(
        [row("olifant-a", "a", speedup=speedup), row("olifant-a", "a", speedup=3.0, regime="cached")]
    )  # another regime does not count
    (a,) = uncached_speedups(df, {"olifant-a": "a"})
    assert a.verdict == want
    assert a.detail == f"k=5: {speedup:.2f}x [{speedup - W:.2f}, {speedup + W:.2f}], 20 prompts (margin 0.02)"


def cached(cells):
    """A summary and a per-prompt frame of cached cells from {(strategy, task, k): [(first-token acceptance,
    speedup), ...one per prompt]} (100 first drafts a prompt, plain at 10 tok/s)."""
    rows, gens = [], []
    for (s, t, k), per_prompt in cells.items():
        ftas, speeds = zip(*per_prompt)
        rows.append(row(s, t, regime="cached", k=k, fta=sum(ftas) / len(ftas), speedup=sum(speeds) / len(speeds)))
        for i, (f, sp) in enumerate(per_prompt):
            gens.append(
                dict(strategy=s, task=t, k=k, regime="cached", pair=f"{t}{i}", version="current", measure="timed")
                | dict(drafted=100, first_drafted=100, first_accepted=100 * f, tokens_per_s=10 * sp)
                | dict(plain_tokens_per_s=10.0)
            )
    return pd.DataFrame(rows), pd.DataFrame(gens)


LINE = (0.1, 0.2, 0.3, 0.5)  # first-token acceptance of four cells, k 1 to 4


def test_break_even_is_where_the_line_crosses_one():
    """speedup = 0.6 + 2 x acceptance on every one of ten prompts: every resample crosses 1 at 0.20."""
    df, prompts = cached({("s", "a", k): [(f, 0.6 + 2 * f)] * 10 for k, f in enumerate(LINE, 1)})
    df = pd.concat([df, pd.DataFrame([row("plain", "a", regime="cached", speedup=3.0, fta=0.0, k=0)])])  # left out
    check = cached_break_even(df, prompts)
    assert check.verdict == HOLDS
    assert check.detail.startswith("line crosses 1.0 at 0.20 [0.20, 0.20] (speedup = 0.60 + 2.00 x acceptance")
    assert "interval over prompts within each task, at least 10 a task, every one of 4 cells recomputed" in check.detail
    assert "3 of 4 cells at speedup >= 1, the lowest first-token acceptance among them 0.20" in check.detail
    far_df, far_prompts = cached({("s", "a", k): [(f, 0.2 + f)] * 10 for k, f in enumerate((0.1, 0.3, 0.5), 1)})
    far = cached_break_even(far_df, far_prompts)
    assert far.verdict == FAILS and "crosses 1.0 at 0.80 [0.80, 0.80]" in far.detail
    assert "none of 3 cells reached 1" in far.detail


def test_break_even_resamples_prompts_not_cells():
    """Every cell lies on the line 0.6 + 2 x acceptance, but each task's prompts run 0.6x and 1.4x of it in turn (a
    prompt slow for one cell is slow for all: they share it and plain's time). Resampling cells would see no
    spread; resampling prompts scales a task's cells together by the drawn prompts' mean factor (about 0.75 to 1.25),
    so the crossing, (1 / factor - 0.6) / 2, runs from below 0.15 to above 0.25: inconclusive."""
    cells = {}
    for t in ("a", "b"):
        for k, f in enumerate(LINE, 1):
            cells[("s", t, k)] = [(f, (0.6 + 2 * f) * m) for m in (0.6, 1.4) * 5]
    df, prompts = cached(cells)
    check = cached_break_even(df, prompts)
    lo, hi = (float(x) for x in check.detail.split("[")[1].split("]")[0].split(", "))
    assert check.verdict == INCONCLUSIVE and "crosses 1.0 at 0.20" in check.detail
    assert lo < 0.15 < 0.25 < hi


def test_break_even_needs_ten_prompts_a_task_and_prompts_at_all():
    df, prompts = cached({("s", "a", k): [(f, 0.6 + 2 * f)] * 5 for k, f in enumerate(LINE, 1)})
    few = cached_break_even(df, prompts)
    assert few.verdict == INCONCLUSIVE and "at 0.20 [too few prompts]" in few.detail
    none = cached_break_even(df)
    assert none.verdict == INCONCLUSIVE and none.detail.startswith("no per-prompt data")


def test_a_model_error_widens_the_break_even():
    """Speedups 10% low or high move the exact line's crossing to (1 / 0.9 - 0.6) / 2 = 0.256 and
    (1 / 1.1 - 0.6) / 2 = 0.155: still within 15-30%; with 20%, (1 / 0.8 - 0.6) / 2 = 0.325 is not."""
    df, prompts = cached({("s", "a", k): [(f, 0.6 + 2 * f)] * 10 for k, f in enumerate(LINE, 1)})
    ten = cached_break_even(df, prompts, model_error=0.10)
    assert ten.verdict == HOLDS and "[0.15, 0.26]" in ten.detail and "model error +-10.0%" in ten.detail
    assert cached_break_even(df, prompts, model_error=0.20).verdict == INCONCLUSIVE


def test_break_even_refuses_a_flat_or_falling_line():
    df, prompts = cached({("s", "a", k): [(f, 1 - f)] * 10 for k, f in enumerate((0.1, 0.2, 0.3), 1)})
    check = cached_break_even(df, prompts)
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
    df = pd.DataFrame(
        [
            row("s", "a", speedup=s, energy_ratio=e, power_measured=True, measure="timed")
            for s, e in zip((1.0, 1.5, 2.0), ratios)
        ]
    )
    check = energy_tracks_speedup(df)
    assert check.verdict == want and "over 3 timed cells (measured power)" in check.detail


def test_estimated_or_replayed_energy_cannot_test_the_claim():
    """Energy estimated from time, or replayed (predicted time x mean power), tracks speedup by construction."""
    cells = [row("s", "a", speedup=s, energy_ratio=s) for s in (1.0, 1.5, 2.0)]
    check = energy_tracks_speedup(pd.DataFrame(cells))  # power_measured False: estimated
    assert check.verdict == NOT_TESTABLE and check.detail.startswith("energy estimated from time in every one of 3")
    replayed = pd.DataFrame(cells).assign(power_measured=True, measure="replay", power_source="nvml")
    check = energy_tracks_speedup(replayed)
    assert check.verdict == NOT_TESTABLE and "replayed (predicted time x measured mean power)" in check.detail
    named = pd.DataFrame(cells).assign(power_measured=True, power_source="estimate")
    assert energy_tracks_speedup(named).verdict == NOT_TESTABLE


def test_check_claims_and_its_table():
    df = pd.DataFrame(
        [
            row("olifant-a", "a", acceptance=0.3, speedup=1.2, energy_ratio=1.2, power_measured=True),
            row("olifant-b", "a", acceptance=0.1, speedup=0.9, energy_ratio=0.9, power_measured=True),
            row("olifant-a", "b", acceptance=0.1, speedup=0.95, energy_ratio=0.95, power_measured=True),
            row("olifant-b", "b", acceptance=0.4, speedup=1.3, energy_ratio=1.3, power_measured=True),
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
    verdicts = {c.target: c.verdict for c in checks}
    assert verdicts.pop("cached break-even near 20-25% first-token acceptance") == INCONCLUSIVE  # no prompts given
    assert set(verdicts.values()) == {HOLDS}, claims_table(checks)
    assert {c.family_size for c in checks if "uncached speedup" in c.target} == {2}  # one family over the bases
    table = claims_table(checks)
    assert "| holds " in table and "does not hold" not in table
