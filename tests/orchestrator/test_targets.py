"""The future-work targets as checks over a summary frame (the demo prints them; the README reports them)."""

from __future__ import annotations

import pandas as pd
import pytest

from orchestrator.demo import DEMO_SPEC
from orchestrator.spec import load_spec, parse_spec
from orchestrator.targets import (
    NOISE,
    Roles,
    adaptive_speedup,
    check_all,
    checks_table,
    distilled_acceptance,
    exact_match,
    hybrid_speedup,
    roles,
    tolerance,
)

# Strategy names that say nothing about their drafts: the roles must come from drafts, corpora and options.
RENAMED = """
[experiment]
name = "r"
[verifier]
model = "org/model"
[[corpora]]
name = "docs"
path = "demo:pydoc-train"
[[corpora]]
name = "docs-by-verifier"
path = "demo:pydoc-train"
labels = "verifier"
[[corpora]]
name = "plays"
path = "demo:shakespeare-train"
[[tasks]]
name = "t"
path = "demo:pydoc-test"
[[tasks]]
name = "u"
path = "demo:shakespeare-test"
[[strategies]]
name = "a"
draft = "plain"
[[strategies]]
name = "b"
draft = "ngram"
[[strategies]]
name = "c"
draft = "olifant"
corpus = "docs"
[[strategies]]
name = "c2"
draft = "olifant"
corpus = "plays"
[[strategies]]
name = "d"
draft = "olifant"
corpus = "docs-by-verifier"
tasks = ["t"]
[[strategies]]
name = "e"
draft = "hybrid"
corpus = "docs"
[[strategies]]
name = "f"
draft = "hybrid"
corpus = "docs"
adaptive = true
k = [8]
[[strategies]]
name = "g"
draft = "lookup"
"""


def frame(rows):
    cols = ["strategy", "task", "k", "regime", "speedup", "acceptance", "exact_match"]
    return pd.DataFrame(rows, columns=cols)


def grid(strategy, task, speedups, acceptances, regime="uncached", ks=(3, 5, 8)):
    return [(strategy, task, k, regime, s, a, 1.0) for k, s, a in zip(ks, speedups, acceptances)]


def test_roles_come_from_drafts_corpora_and_options_not_names():
    r = roles(parse_spec(RENAMED))
    assert r.distilled == (("d", "c"),)  # same draft and options, the corpus-trained twin of its text
    assert r.hybrid == (("e", ("b", "c")),)  # its declared parts; not c2 (another instance base), not g
    assert r.adaptive == (("f", "e"),)
    assert r.runs_on("d") == ("t",) and r.runs_on("e") == ("t", "u")


@pytest.mark.parametrize(
    "name, domains", [("demo.toml", ("pydoc", "shakespeare", "legal")), ("demo-toy.toml", ("pydoc", "shakespeare"))]
)
def test_roles_of_the_demo_specs(name, domains):
    r = roles(load_spec(DEMO_SPEC.with_name(name)))
    for d in domains:
        assert (f"distilled-{d}", f"olifant-{d}") in r.distilled
        assert (f"hybrid-{d}", ("ngram", f"distilled-{d}")) in r.hybrid  # the hybrid over the distilled base
        assert r.runs_on(f"distilled-{d}") == (d,)
    assert bool(r.adaptive) == (name == "demo-toy.toml")  # the real demo cut the adaptive hybrid
    if r.adaptive:
        assert all((f"hybrid-{d}-adaptive", f"hybrid-{d}") in r.adaptive for d in domains)


def test_distilled_must_win_at_every_k_and_regime():
    rows = grid("olifant-x", "x", [1.1] * 3, [0.1, 0.1, 0.1]) + grid("distilled-x", "x", [1.2] * 3, [0.3, 0.2, 0.1])
    (check,) = distilled_acceptance(frame(rows), "distilled-x", "olifant-x", ("x",))
    assert not check.ok and "k=8: 0.10 vs 0.10" in check.detail  # a tie at k=8 is not higher
    rows[-1] = ("distilled-x", "x", 8, "uncached", 1.2, 0.11, 1.0)
    assert distilled_acceptance(frame(rows), "distilled-x", "olifant-x", ("x",))[0].ok
    (missing,) = distilled_acceptance(frame(rows), "distilled-x", "olifant-x", ("y",))
    assert not missing.ok and missing.detail == "missing"
    cached = grid("distilled-x", "x", [1.2] * 3, [0.3] * 3, regime="cached")  # the trained base ran uncached only
    checks = distilled_acceptance(frame(rows + cached), "distilled-x", "olifant-x", ("x",))
    assert [c.regime for c in checks] == ["uncached"] and checks[0].ok  # a regime one of them skipped is not checked


def test_hybrid_against_its_parts_and_plain():
    rows = (
        grid("olifant-x", "x", [1.1, 1.2, 1.0], [0.1] * 3)
        + grid("ngram", "x", [1.5, 1.8, 1.7], [0.3] * 3)
        + grid("hybrid-x", "x", [1.6, 1.75, 1.7], [0.35] * 3)
        + grid("hybrid-x", "x", [1.0, 0.97, 0.9], [0.35] * 3, regime="cached")
        + grid("hybrid-x", "x", [1.0, 0.97, 1.1], [0.35] * 3, regime="cached-standard")
    )
    parts = ("ngram", "olifant-x")
    checks = {c.regime: c for c in hybrid_speedup(frame(rows), "hybrid-x", parts, noise=0.05)}
    assert checks["uncached"].ok and checks["uncached"].detail == "1.75 vs ngram 1.80"  # within 5%
    assert not checks["cached"].ok and "k=8: 0.90" in checks["cached"].detail
    assert checks["cached-standard"].ok
    assert not hybrid_speedup(frame(rows), "hybrid-x", parts, noise=0.0)[0].ok


def test_adaptive_against_the_best_fixed_k():
    rows = grid("hybrid-x", "x", [1.2, 1.5, 1.4], [0.3] * 3) + [
        ("hybrid-x-adaptive", "x", 8, "uncached", 1.46, 0.5, 1.0)
    ]
    (check,) = adaptive_speedup(frame(rows), "hybrid-x-adaptive", "hybrid-x")
    assert check.ok and check.detail == "1.46 vs 1.50 (k=5)"
    rows[-1] = ("hybrid-x-adaptive", "x", 8, "uncached", 1.3, 0.5, 1.0)
    assert not adaptive_speedup(frame(rows), "hybrid-x-adaptive", "hybrid-x")[0].ok


def test_exact_match_and_the_table():
    rows = grid("ngram", "x", [1.5] * 3, [0.3] * 3)
    assert exact_match(frame(rows))[0].ok
    rows[0] = ("ngram", "x", 3, "uncached", 1.5, 0.3, 0.75)
    assert exact_match(frame(rows))[0].detail == "ngram"
    table = checks_table(check_all(frame(rows), Roles()))
    assert "exact match 1.0" in table and "False" in table


def test_an_adaptive_hybrid_scoring_by_share_has_the_fixed_hybrid_as_its_base():
    """At fixed length and ibase_min 0 the confidence changes no proposal (it is not in the fixed hybrid's cell
    key), so the adaptive hybrid that names one compares with the fixed hybrid; with ibase_min > 0 it does
    change proposals, and only the fixed hybrid with the same confidence is the base."""
    spec = RENAMED.replace(
        'name = "f"\ndraft = "hybrid"\ncorpus = "docs"\n',
        'name = "f"\ndraft = "hybrid"\ncorpus = "docs"\nconfidence = "share"\nthreshold = 0.1\n',
    )
    assert roles(parse_spec(spec)).adaptive == (("f", "e"),)
    gated = spec.replace(
        'name = "e"\ndraft = "hybrid"\ncorpus = "docs"\n',
        'name = "e"\ndraft = "hybrid"\ncorpus = "docs"\nibase_min = 0.5\nconfidence = "depth_share"\n',
    )
    gated = gated.replace('confidence = "share"\nthreshold = 0.1\n', 'confidence = "share"\nibase_min = 0.5\n')
    assert roles(parse_spec(gated)).adaptive == ()
    assert roles(parse_spec(gated.replace('"depth_share"', '"share"'))).adaptive == (("f", "e"),)


def test_tolerance_is_two_standard_errors_of_a_speedup_ratio_at_least_the_floor():
    # 2 x 0.10 x sqrt(2 / 3) = 0.163299; 2 x 0.02 x sqrt(2 / 3) = 0.0327 < the 5% floor
    assert tolerance(0.10, 3) == pytest.approx(0.163299, abs=1e-6)
    assert tolerance(0.02, 3) == NOISE == 0.05
    assert tolerance(0.10, 8) == pytest.approx(0.1)  # 2 x 0.10 x sqrt(2 / 8) = 0.1
    assert tolerance(None, 3) == NOISE  # no cells with identical passes: the floor
    assert tolerance(0.10, 0) == NOISE
