"""Sampling math for speculative decoding at temperature > 0: transformers' warping and the lossless rules.

The verifier's distribution p at a position is its logits warped exactly as transformers' `generate` warps them
under `do_sample=True` (`TemperatureLogitsWarper`, `TopKLogitsWarper`, `TopPLogitsWarper`, in that order, in
float32, with the same tie and threshold semantics), then softmaxed in float64 on the CPU so that sampling is
device-independent and reproducible from a seeded `torch.Generator`.

A drafted token x is judged by speculative sampling (Leviathan et al., 2023; Chen et al., 2023):

- a draft that reports the distribution q it sampled x from: accept with probability min(1, p(x) / q(x)); on
  rejection the position is drawn from the residual max(0, p - q), normalised;
- any other draft (deterministic or not) is a point mass q = 1[x]: accept with probability p(x); on rejection
  draw from p with x removed, normalised.

Either way the token emitted at the position is distributed exactly as p (the output distribution equals
sampling from the verifier alone). A rejected position may be judged again, against the residual, by a fresh
draft; that is how the cached regime's first-token fast path carries a rejection into the next round.

Example:
    >>> warp = Warp(temperature=0.7, top_k=50, top_p=0.9)
    >>> p = warped_probs(logits_row, warp)            # (V,) float64 on CPU, sums to 1
    >>> ExactRule().accept(p, token, None, generator)   # point mass: True with probability p[token]
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Warp:
    """Sampling settings as transformers names them; temperature 0 means greedy (no warping, no sampling)."""

    temperature: float = 0.0
    top_k: int = 0  # 0: no top-k filter
    top_p: float = 1.0  # 1.0: no nucleus filter

    def __post_init__(self):
        t = self.temperature
        if not (isinstance(t, numbers.Real) and math.isfinite(t) and t >= 0):
            raise ValueError(f"temperature={self.temperature!r} is not accepted; give a number >= 0 (0: greedy)")
        if not isinstance(self.top_k, numbers.Integral) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise ValueError(f"top_k={self.top_k!r} is not accepted; give an integer >= 0 (0: no top-k filter)")
        if not (isinstance(self.top_p, numbers.Real) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p={self.top_p!r} is not accepted; give a number in (0, 1] (1: no nucleus filter)")

    @property
    def greedy(self) -> bool:
        """True at temperature 0: decode by argmax."""
        return self.temperature == 0


def warp_scores(logits: torch.Tensor, warp: Warp) -> torch.Tensor:
    """Logits (..., V) warped as transformers does: float32, then temperature, top-k, top-p; removed ones -inf."""
    scores = logits.to(torch.float32)
    if warp.temperature != 1.0:
        scores = scores / float(warp.temperature)
    if warp.top_k != 0:
        top_k = min(int(warp.top_k), scores.size(-1))
        # ties with the k-th value are kept, as in TopKLogitsWarper
        scores = scores.masked_fill(scores < torch.topk(scores, top_k)[0][..., -1, None], -math.inf)
    if warp.top_p < 1.0:
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        sorted_remove = cumulative <= (1 - warp.top_p)
        sorted_remove[..., -1:] = False  # min_tokens_to_keep = 1
        remove = sorted_remove.scatter(-1, sorted_indices, sorted_remove)
        scores = scores.masked_fill(remove, -math.inf)
    return scores


def warped_probs(logits: torch.Tensor, warp: Warp) -> torch.Tensor:
    """The sampling distribution of logits (..., V): warped on the CPU, softmaxed in float64."""
    return warp_scores(logits.detach().to("cpu"), warp).to(torch.float64).softmax(dim=-1)


def make_generator(seed: int | None) -> tuple[torch.Generator, int]:
    """A CPU generator and the seed it was started from (a fresh random one when `seed` is None)."""
    gen = torch.Generator(device="cpu")
    if seed is None:
        return gen, int(gen.seed())
    gen.manual_seed(int(seed))
    return gen, int(seed)


def sample(p: torch.Tensor, generator: torch.Generator) -> int:
    """One token drawn from the distribution p (V,) by inversion: the first id whose cumulative mass exceeds u."""
    cumulative = p.cumsum(0)
    u = torch.rand((), generator=generator, dtype=torch.float64) * cumulative[-1]
    token = int(torch.searchsorted(cumulative, u, right=True))  # never an id of zero mass: its cumsum equals the last
    if token >= len(p):  # u rounded up to the total: the last id with mass
        token = int(torch.nonzero(p > 0)[-1])
    return token


def uniform(generator: torch.Generator) -> float:
    """One draw from U[0, 1)."""
    return float(torch.rand((), generator=generator, dtype=torch.float64))


def normalised(weights: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """weights / their sum; `fallback` when nothing is left (only reached through float rounding)."""
    total = float(weights.sum())
    return weights / total if total > 0 else fallback


class ExactRule:
    """Speculative sampling's acceptance and residual: lossless for point-mass and distribution drafts."""

    def accept_probability(self, p: torch.Tensor, token: int, q: torch.Tensor | None) -> float:
        """min(1, p(x) / q(x)); p(x) for a point-mass draft (q None)."""
        px = float(p[token])
        if q is None:
            return px
        qx = float(q[token])
        return 1.0 if qx <= px else px / qx

    def accept(self, p: torch.Tensor, token: int, q: torch.Tensor | None, generator: torch.Generator) -> bool:
        """Accept the drafted `token` at a position whose verifier distribution is p."""
        a = self.accept_probability(p, token, q)
        return a >= 1.0 or uniform(generator) < a

    def residual(self, p: torch.Tensor, token: int, q: torch.Tensor | None) -> torch.Tensor:
        """The position's distribution once `token` is rejected: max(0, p - q) normalised (point mass: p without x)."""
        if q is None:
            rest = p.clone()
            rest[token] = 0.0
        else:
            rest = (p - q).clamp_min(0.0)
        return normalised(rest, p)


EXACT = ExactRule()
