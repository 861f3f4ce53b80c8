"""transformers' warping, reproduced: temperature, top-k and top-p as its own warpers apply them, ties included;
bad values refused in one line; a seeded generator that repeats its draws."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from workers.decoding.sampling import Warp, make_generator, sample, warp_scores, warped_probs


def hf_scores(procs: LogitsProcessorList, logits: torch.Tensor) -> torch.Tensor:
    """Scores (T, V) processed by transformers' warpers (float32, as generate casts them)."""
    return procs(None, logits.to(torch.float32))


WARP_CASES = [
    Warp(1.0),
    Warp(0.7),
    Warp(1.3, top_k=5),
    Warp(0.7, top_p=0.9),
    Warp(0.7, top_k=4, top_p=0.8),
    Warp(0.5, top_k=1),
    Warp(1.0, top_k=100, top_p=0.5),
    Warp(2.0, top_k=3, top_p=0.3),
    Warp(1.0, top_p=1e-9),
]


@pytest.mark.parametrize("warp", WARP_CASES, ids=str)
def test_warp_equals_transformers_warpers(warp):
    torch.manual_seed(0)
    logits = torch.randn(6, 50) * 3
    ties = torch.round(torch.randn(6, 50))  # many exact ties at the top-k and top-p thresholds
    procs = LogitsProcessorList()
    if warp.temperature != 1.0:
        procs.append(TemperatureLogitsWarper(float(warp.temperature)))
    if warp.top_k:
        procs.append(TopKLogitsWarper(warp.top_k))
    if warp.top_p < 1.0:
        procs.append(TopPLogitsWarper(warp.top_p))
    for x in (logits, ties):
        ours, theirs = warp_scores(x, warp), hf_scores(procs, x)
        assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
        assert torch.equal(ours, theirs)
        p = warped_probs(x, warp)
        assert p.dtype == torch.float64 and p.device.type == "cpu"
        assert torch.allclose(p.sum(-1), torch.ones(6, dtype=torch.float64))
        assert torch.allclose(p, theirs.softmax(-1).double(), atol=1e-6)


def test_top_k_keeps_ties_and_top_p_keeps_at_least_one():
    scores = torch.tensor([3.0, 3.0, 3.0, 1.0, 0.0])
    assert torch.isfinite(warp_scores(scores, Warp(1.0, top_k=2))).tolist() == [True, True, True, False, False]
    kept = torch.isfinite(warp_scores(torch.tensor([5.0, 0.0, -1.0]), Warp(1.0, top_p=1e-9)))
    assert kept.tolist() == [True, False, False]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": -0.1}, "temperature=-0.1"),
        ({"temperature": float("nan")}, "temperature=nan"),
        ({"top_k": -1}, "top_k=-1"),
        ({"top_k": 2.5}, "top_k=2.5"),
        ({"top_p": 0.0}, "top_p=0.0"),
        ({"top_p": 1.5}, "top_p=1.5"),
    ],
)
def test_bad_warp_values_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Warp(**{"temperature": 1.0, **kwargs})


def test_generator_is_reproducible_and_records_its_seed():
    a, seed_a = make_generator(7)
    b, _ = make_generator(7)
    p = torch.full((10,), 0.1, dtype=torch.float64)
    assert seed_a == 7 and [sample(p, a) for _ in range(20)] == [sample(p, b) for _ in range(20)]
    c, seed_c = make_generator(None)
    d, _ = make_generator(seed_c)
    assert [sample(p, c) for _ in range(20)] == [sample(p, d) for _ in range(20)]
