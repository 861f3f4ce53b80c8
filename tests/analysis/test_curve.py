"""The learning curve (`analysis.curve`) on hand-worked generations: points with intervals, the slope per decade with
its paired interval and verdict, the crossing against the session 4-gram, and the sizes read from a stored spec."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.curve import corpus_sizes, crossing, curve_points, curve_slopes, distilled_vs_corpus

SIZES = {
    "oli-5": ("olifant", 1e5),
    "oli-6": ("olifant", 1e6),
    "oli-7": ("olifant", 1e7),
    "rest-5": ("rest", 1e5),
    "rest-6": ("rest", 1e6),
}


def gens(n: int = 4) -> pd.DataFrame:
    """n prompts x 10 drafted tokens: olifant accepts 1, 2, 3 (0.1, 0.2, 0.3 at 10^5, 10^6, 10^7) on every prompt;
    REST 1 then 3 on the first half of the prompts and 3 then 1 on the other (no trend); the 4-gram 2.5 of 10 on
    every prompt."""
    rows = []
    for p in range(n):
        for name, accepted in [("oli-5", 1), ("oli-6", 2), ("oli-7", 3), ("ngram", 2.5)]:
            rows.append((name, p, accepted))
        rows += [("rest-5", p, 1 if p < n // 2 else 3), ("rest-6", p, 3 if p < n // 2 else 1)]
    return pd.DataFrame(
        [
            dict(strategy=s, task="code", k=5, regime="uncached", prompt_index=p, accepted=a, drafted=10)
            for s, p, a in rows
        ]
    )


def test_points_carry_their_acceptance_and_interval():
    g = gens().assign(measure="replay")
    timed_twin = g[(g["strategy"] == "oli-6") & (g["prompt_index"] == 0)].assign(measure="timed", accepted=9)
    pts = curve_points(pd.concat([timed_twin, g]), SIZES, k=5).set_index("strategy")  # the replay counts, once
    assert pts.loc["oli-6", "acceptance"] == pytest.approx(0.2)
    assert pts.loc["oli-6", ["acceptance_lo", "acceptance_hi"]].tolist() == pytest.approx(
        [0.2, 0.2]
    )  # every prompt 0.2
    assert pts.loc["rest-5", "acceptance"] == pytest.approx(0.2) and pts.loc["rest-5", "acceptance_lo"] < 0.2
    assert set(pts["n_prompts"]) == {4} and curve_points(gens(), SIZES, k=3).empty  # no generation at k = 3


def test_the_slope_per_decade_and_its_verdict():
    slopes = curve_slopes(gens(12), SIZES, k=5).set_index("family")
    oli = slopes.loc["olifant"]
    assert oli["slope_per_decade"] == pytest.approx(0.1) and [oli["slope_lo"], oli["slope_hi"]] == pytest.approx(
        [0.1, 0.1]
    )
    assert oli["verdict"] == "holds" and oli["sizes"] == 3
    rest = slopes.loc["rest"]  # +0.2 on two prompts, -0.2 on the other two: 0 on average, either sign resampled
    assert rest["slope_per_decade"] == pytest.approx(0.0) and rest["slope_lo"] < 0 < rest["slope_hi"]
    assert rest["verdict"] == "inconclusive" and set(slopes["correction"]) == {"Holm over 2"}
    assert (
        curve_slopes(gens(4), SIZES, k=5).set_index("family").loc["olifant", "verdict"] == "inconclusive"
    )  # 4 prompts


def test_the_curves_verdicts_are_one_family_corrected_by_holm():
    """Twelve prompts; a draft family at 0.1, 0.2, 0.3 on eight prompts and 0.1, 0.2, 0.0 on four: alone its slope's
    interval clears 0 (holds, one-sided p about 0.0045). Six such families are one family of six verdicts: Holm asks
    the smallest p to be at most 2.5% / 6 (0.0042), none is, and all six are inconclusive, each saying it held
    alone."""
    g = gens(12)
    g.loc[(g["strategy"] == "oli-7") & (g["prompt_index"] < 4), "accepted"] = 0
    oli = g[g["strategy"].str.startswith("oli")]
    alone = curve_slopes(oli, {n: SIZES[n] for n in SIZES if "oli" in n}, k=5)
    assert alone["correction"].tolist() == ["none (one verdict)"] and alone["verdict"].tolist() == ["holds"]
    six = pd.concat([oli.assign(strategy=oli["strategy"].str.replace("oli", f"d{i}")) for i in range(6)])
    sizes = {n.replace("oli", f"d{i}"): (f"d{i}", t) for i in range(6) for n, (f, t) in SIZES.items() if f == "olifant"}
    family = curve_slopes(six, sizes, k=5)
    assert set(family["correction"]) == {"Holm over 6"} and len(family) == 6
    assert set(family["verdict"]) == {"inconclusive"} and set(family["before"]) == {"holds"}


def test_a_line_fits_a_straight_curve_and_not_a_bent_one():
    straight = curve_slopes(gens(), SIZES, k=5).set_index("family")
    assert straight.loc["olifant", "fit"] == "line fits"  # 0.1, 0.2, 0.3 a decade apart: on a line
    assert straight.loc["olifant", "curvature"] == pytest.approx(0.0, abs=1e-12)
    assert straight.loc["rest", "fit"] == "untested (2 sizes)" and pd.isna(straight.loc["rest", "curvature"])
    g = gens()
    # every prompt: 0.1, 0.3, 0.35 at 10^5, 10^6, 10^7 (a curve flattening), +-0.05 at 10^7 from prompt to prompt
    g.loc[g["strategy"] == "oli-6", "accepted"] = 3
    g.loc[g["strategy"] == "oli-7", "accepted"] = [3.0, 4.0, 3.0, 4.0]
    bent = curve_slopes(g, SIZES, k=5).set_index("family").loc["olifant"]
    # parabola through (0, 0.1), (1, 0.3), (2, 0.35): c = (0.35 - 2 * 0.3 + 0.1) / 2 = -0.075 per decade squared
    assert bent["curvature"] == pytest.approx(-0.075)
    assert bent["curvature_hi"] < 0 and bent["fit"] == "bends"
    g.loc[g["strategy"] == "oli-7", "accepted"] = [2.0, 6.0, 2.0, 6.0]  # 0.2 or 0.6 at 10^7: the bend is not sure
    assert curve_slopes(g, SIZES, k=5).set_index("family").loc["olifant", "fit"] == "line fits"


def test_the_crossing_is_the_first_size_beyond_the_reference_or_none():
    assert crossing(gens(), SIZES, "olifant", "ngram", 5, "uncached").startswith(
        "olifant clears ngram from 10^7 tokens"
    )
    line = crossing(gens(), SIZES, "rest", "ngram", 5, "uncached")
    assert line.startswith("rest does not clear ngram up to 10^6 tokens") and "difference there -0.050" in line


def test_sizes_are_the_trained_tokens_else_the_corpus_cap():
    spec = """
[[corpora]]
name = "small"
max_tokens = 100_000
[[corpora]]
name = "whole"
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "oli-small"
draft = "olifant"
corpus = "small"
[[strategies]]
name = "rest-whole"
draft = "rest"
corpus = "whole"
"""
    assert corpus_sizes(spec, {}) == {"oli-small": ("olifant", 1e5)}  # the whole corpus's size is unknown
    assert corpus_sizes(spec, {"small": 99_871, "whole": 5_000_000}) == {
        "oli-small": ("olifant", 99_871.0),
        "rest-whole": ("rest", 5e6),
    }


def test_a_distilled_base_is_its_own_family_compared_with_the_corpus_bases():
    spec = """
[[corpora]]
name = "c6"
path = "demo:code-train"
max_tokens = 1_000_000
[[corpora]]
name = "c7"
path = "demo:code-train"
max_tokens = 10_000_000
[[corpora]]
name = "c6-distilled"
path = "demo:code-train"
max_tokens = 1_000_000
labels = "verifier"
label_max_tokens = 1_000_000
[[strategies]]
name = "oli-6"
draft = "olifant"
corpus = "c6"
[[strategies]]
name = "oli-7"
draft = "olifant"
corpus = "c7"
[[strategies]]
name = "dist-6"
draft = "olifant"
corpus = "c6-distilled"
"""
    sizes = corpus_sizes(spec, {})
    assert sizes["dist-6"] == ("olifant (distilled)", 1e6) and sizes["oli-7"] == ("olifant", 1e7)
    g = gens()
    dist = g[g["strategy"] == "oli-7"].assign(strategy="dist-6", accepted=[4, 4, 3, 3])  # 0.35: about 10^7's 0.3
    g = pd.concat([g, dist])
    assert "olifant (distilled)" not in set(curve_slopes(g, sizes, k=5)["family"])  # one size: no slope
    first, second = distilled_vs_corpus(g, sizes, 5, "uncached")
    assert first.startswith("dist-6 (10^6 labelled tokens) - oli-6 (10^6 corpus tokens)") and "+0.150" in first
    assert "(holds)" in first  # +0.1 or +0.2 on every prompt
    assert second.startswith("dist-6 (10^6 labelled tokens) - oli-7") and "(inconclusive)" in second  # +0.1 or 0


def test_a_text_cut_at_several_sizes_makes_the_curve():
    spec = """
[[corpora]]
name = "code-5"
path = "demo:code-train"
max_tokens = 100_000
[[corpora]]
name = "code"
path = "demo:code-train"
[[corpora]]
name = "shakespeare"
path = "demo:shakespeare-train"
[[strategies]]
name = "oli-code-5"
draft = "olifant"
corpus = "code-5"
[[strategies]]
name = "oli-code"
draft = "olifant"
corpus = "code"
[[strategies]]
name = "oli-shakespeare"
draft = "olifant"
corpus = "shakespeare"
"""
    trained = {"code": 10**7, "shakespeare": 1_350_094}
    # Shakespeare's one base is no point on code's curve
    assert corpus_sizes(spec, trained) == {"oli-code-5": ("olifant", 1e5), "oli-code": ("olifant", 1e7)}
    two = spec + '[[corpora]]\nname = "sh-4"\npath = "demo:shakespeare-train"\nmax_tokens = 10_000\n'
    assert corpus_sizes(two, trained) == {  # two texts, two curves
        "oli-code-5": ("olifant on code-train", 1e5),
        "oli-code": ("olifant on code-train", 1e7),
        "oli-shakespeare": ("olifant on shakespeare-train", 1_350_094.0),
    }
