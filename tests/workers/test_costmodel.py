"""The pass-cost model: the fit recovers a known linear cost and shrugs off slow passes, predictions are never
negative, a real (tiny) verifier's passes are measured in the shapes the decoding records, and the validation
figures (relative errors, Spearman with ties) match hand-worked values."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tests.workers.decoding.test_decoding import tiny_lm
from workers.costmodel import (
    FEATURES,
    DesignPoint,
    PassCostModel,
    design,
    error_summary,
    fit,
    log_spaced,
    measure_pass_costs,
    medians,
    nnls,
    predict_generation,
    ranks,
    spearman,
    time_points,
    tokens_per_s_errors,
)
from workers.decoding import speculative_generate
from workers.drafts import make_draft
from workers.verifier import Verifier

TRUE = {"intercept": 0.030, "fed": 0.0012, "kept": 0.0004, "attention": 2e-6, "cached": 5e-5}


def synthetic(coef: dict[str, float], repeats: int = 3, slow: float = 0.0, seed: int = 0) -> list:
    """Samples of the design grid from a known cost; with `slow`, one repeat of every third point takes 5x."""
    rng = random.Random(seed)
    truth = PassCostModel("v", "cpu", coef)
    out = []
    shapes = [p.shape for p in design()]
    for i, shape in enumerate(shapes):
        for r in range(repeats):
            s = truth.pass_seconds(*shape) * (1 + rng.uniform(-0.01, 0.01))
            out.append((*shape, s * 5 if slow and r == 0 and i % 3 == 0 else s))
    return out


def test_the_fit_recovers_a_known_linear_cost():
    got = fit(synthetic(TRUE))
    assert set(got) == set(FEATURES)
    for name, value in TRUE.items():
        assert got[name] == pytest.approx(value, rel=0.1), name


def test_the_fit_shrugs_off_one_slow_pass_in_three():
    clean, noisy = fit(synthetic(TRUE)), fit(synthetic(TRUE, slow=5.0))
    model = PassCostModel("v", "cpu", noisy)
    for shape in [(76, 0, 9), (1, 120, 1), (17, 60, 17), (160, 0, 1)]:
        true = PassCostModel("v", "cpu", TRUE).pass_seconds(*shape)
        assert model.pass_seconds(*shape) == pytest.approx(true, rel=0.05)
    assert noisy["fed"] == pytest.approx(clean["fed"], rel=0.1)


def test_the_fit_never_makes_a_pass_cheaper():
    """A cost that falls with the cached tokens is no transformer's: the fit keeps every coefficient >= 0."""
    samples = [(n, c, n, 0.05 + 0.001 * n - 0.0001 * c) for n in (1, 4, 16) for c in (0, 100, 300)]
    got = fit(samples)
    assert min(got.values()) >= 0
    assert PassCostModel("v", "cpu", got).pass_seconds(1, 10_000, 1) > 0


def test_nnls_is_the_exact_constrained_optimum():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert nnls(a, np.array([1.0, 2.0, 3.0])) == pytest.approx([1.0, 2.0])
    # unconstrained x2 would be negative: the best with x2 = 0 is the mean of the rows using x1
    assert nnls(a, np.array([2.0, -1.0, 1.0])) == pytest.approx([1.5, 0.0])


def test_fit_refuses_no_samples_and_zero_times():
    with pytest.raises(ValueError, match="no timed pass"):
        fit([])
    with pytest.raises(ValueError, match="took no time"):
        fit([(1, 0, 1, 0.0)])


def test_medians_group_by_shape():
    assert medians([(1, 0, 1, 3.0), (1, 0, 1, 1.0), (1, 0, 1, 2.0), (2, 0, 1, 7.0)]) == {(1, 0, 1): 2.0, (2, 0, 1): 7.0}


def test_model_sums_passes_and_round_trips_json():
    m = PassCostModel("tiny:float32", "cpu", {"intercept": 0.01, "fed": 0.002, "kept": 0.001, "attention": 1e-5})
    assert m.pass_seconds(3, 7, 2) == pytest.approx(0.01 + 0.006 + 0.002 + 1e-5 * 30)
    passes = [(60, 0, 1), (4, 60, 4), (1, 63, 1)]
    assert m.wall_seconds(passes) == pytest.approx(sum(m.pass_seconds(*p) for p in passes))
    assert predict_generation(m, passes, draft_s=0.25) == pytest.approx(m.wall_seconds(passes) + 0.25)
    assert PassCostModel.from_json(m.to_json()) == m
    assert m.wall_seconds([]) == 0.0


def test_design_covers_the_sweeps_passes():
    points = design(max_fed=17, max_context=160)
    kinds = {p.kind for p in points}
    assert kinds == {"uncached", "prefill", "extend"}
    assert max(p.context for p in points) == 160 and min(p.context for p in points) == 8
    assert {p.n for p in points if p.kind == "extend"} == {1, 2, 4, 8, 17}
    assert all(p.n <= p.context for p in points if p.kind == "uncached")
    assert log_spaced(1, 17, 5) == [1, 2, 4, 8, 17] and log_spaced(5, 5, 3) == [5]


@pytest.mark.usefixtures("one_thread")
def test_measuring_a_real_verifier_fits_its_own_passes():
    """The shapes timed are the shapes `speculative_generate` records, and the model predicts its own samples'
    medians within the spread it was fitted on (no absolute speed is asserted)."""
    verifier = Verifier(tiny_lm("llama", 0, vocab=300))
    model, samples = measure_pass_costs(verifier, list(range(3, 40)), max_fed=9, max_context=64, repeats=2)
    assert model.device == "cpu" and model.verifier.endswith("float32")
    assert min(model.coefficients.values()) >= 0 and verifier.cache is None
    shapes = {(f, c, k) for f, c, k, _ in samples}
    assert (64, 0, 1) in shapes and (1, 64, 1) in shapes and (9, 8, 9) in shapes
    assert len(samples) == 2 * len(design(9, 64))  # two rounds; a prefill and a 1-row uncached pass share a shape
    assert shapes == {p.shape for p in design(9, 64)}  # the shapes the verifier recorded are the points' own
    errors = [abs(model.pass_seconds(*shape) / t - 1) for shape, t in medians(samples).items()]
    assert np.median(errors) < 0.5
    res = speculative_generate(verifier, make_draft("ngram", n=2), list(range(3, 40)), 12, 4, cached=True)
    assert all(model.pass_seconds(*p) > 0 for p in res.passes)


@pytest.mark.usefixtures("one_thread")
def test_a_round_past_the_budget_is_not_started():
    verifier = Verifier(tiny_lm("llama", 1, vocab=300))
    points = [DesignPoint("uncached", 16, 1), DesignPoint("extend", 16, 2)]
    samples = time_points(verifier, list(range(3, 40)), points, repeats=50, budget_s=0.0)
    assert len(samples) == len(points)  # one round always runs
    assert {s[:3] for s in samples} == {(16, 0, 1), (2, 16, 2)}


def test_tokens_per_s_errors_by_hand():
    # predicted 1 s against measured 2 s: predicted tokens/s is twice the measured, an error of 1.0
    assert tokens_per_s_errors([1.0, 2.0, 4.0], [2.0, 2.0, 3.0]) == pytest.approx([1.0, 0.0, 0.25])
    with pytest.raises(ValueError, match="2 predicted wall times against 1"):
        tokens_per_s_errors([1.0, 2.0], [1.0])


def test_error_summary_by_hand():
    med, p90 = error_summary([0.1, 0.4, 0.2, 0.3, 0.0])
    assert med == pytest.approx(0.2) and p90 == pytest.approx(0.36)  # rank 0.9 * 4 = 3.6: 0.3 + 0.6 * 0.1
    assert all(math.isnan(v) for v in error_summary([]))


def test_ranks_share_ties():
    assert list(ranks([10, 20, 20, 5])) == [2.0, 3.5, 3.5, 1.0]
    assert list(ranks([1, 1, 1])) == [2.0, 2.0, 2.0]


def test_spearman_by_hand():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks a = 1, 2.5, 2.5, 4; b = 1, 2, 3, 4: covariance 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    # no ties, one swap: 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 6 * 2 / 120
    assert spearman([1, 2, 3, 4, 5], [1, 3, 2, 4, 5]) == pytest.approx(0.9)
    assert math.isnan(spearman([1.0], [2.0])) and math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError):
        spearman([1, 2], [1])
