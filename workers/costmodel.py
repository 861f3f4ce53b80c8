"""The verifier's pass-cost model: seconds of one forward pass from its shape, measured once per verifier and device.

A replayed generation (`workers.replay`) makes exactly the passes a timed one makes, but runs no verifier: its wall
time is predicted from them. Every pass has a shape (`Verifier.last_shape`): tokens fed, tokens already cached,
logits rows kept. A transformer forward's cost is close to linear in a few features of that shape:

    c(fed, cached, kept) = intercept + a * fed + b * kept + c * fed * (cached + fed) + d * cached

- `fed`: the layers' matmuls, per token fed;
- `kept`: the output layer, per logits row kept (large for a large vocabulary);
- `attention`: every fed token attends to every token before it, cached or fed;
- `cached`: reading the KV cache (and copying it as it grows);
- `intercept`: the launch and Python overhead of one forward.

So one model covers all three regimes: an uncached pass over 70 tokens is (70, 0, k + 1), a cached one-token pass
after 70 is (1, 70, 1). The coefficients are fitted by non-negative least squares (no feature makes a pass
cheaper, so no pass is predicted below zero) on the median of `repeats` timed passes per design point, in relative
terms (a 30 ms pass weighs as much as a 300 ms one): one slow pass on a shared machine moves nothing.

Example:
    >>> m = PassCostModel("v", "cpu", {"intercept": 0.03, "fed": 0.001, "kept": 0.0005})
    >>> round(m.pass_seconds(10, 60, 1), 4), round(m.wall_seconds([(70, 0, 1), (1, 70, 1)]), 4)
    (0.0405, 0.132)
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from workers.decoding.costcurve import PassCosts, verifier_name

if TYPE_CHECKING:  # torch only where passes are timed: the dashboard reads models without it
    from workers.verifier import Verifier

logger = logging.getLogger(__name__)

FEATURES = ("intercept", "fed", "kept", "attention", "cached")
REPEATS = 3  # timed rounds over the design points; the fit reads each point's median

Shape = tuple[int, int, int]  # (tokens fed, tokens cached, logits rows kept)
Sample = tuple[int, int, int, float]  # a shape and its measured seconds


def features(fed: int, cached: int, kept: int) -> tuple[float, ...]:
    """A pass's features in `FEATURES` order."""
    return (1.0, float(fed), float(kept), float(fed) * (cached + fed), float(cached))


@dataclass(frozen=True)
class PassCostModel:
    """Seconds of a verifier pass on one device, linear in `FEATURES` (coefficients in seconds per unit)."""

    verifier: str
    device: str
    coefficients: dict[str, float]

    def pass_seconds(self, fed: int, cached: int, kept: int) -> float:
        """Predicted seconds of one pass (never below 0)."""
        x = features(fed, cached, kept)
        return max(0.0, sum(self.coefficients.get(name, 0.0) * v for name, v in zip(FEATURES, x)))

    def wall_seconds(self, passes: Iterable[Sequence[int]]) -> float:
        """Predicted seconds of a generation's verifier passes, [(fed, cached, kept), ...]."""
        return sum(self.pass_seconds(*p) for p in passes)

    def to_json(self) -> str:
        return json.dumps({"verifier": self.verifier, "device": self.device, "coefficients": self.coefficients})

    @classmethod
    def from_json(cls, text: str) -> PassCostModel:
        raw = json.loads(text)
        return cls(raw["verifier"], raw["device"], {str(k): float(v) for k, v in raw["coefficients"].items()})


def predict_generation(model: PassCostModel, passes: Iterable[Sequence[int]], draft_s: float) -> float:
    """A replayed generation's wall seconds: its passes' predicted cost plus its draft's own measured seconds."""
    return model.wall_seconds(passes) + draft_s


def regime_curve(model: PassCostModel, regime: str, context: int, max_len: int = 8) -> PassCosts:
    """c(0..max_len) of a round drafting n tokens after `context` tokens in `regime`, from the model: uncached, a
    forward over context + n keeping n + 1 rows; cached (the paper's), n tokens fed after the cache (one for n = 0,
    the fast path's pass); cached-standard, the pending token + n."""
    shapes = {
        "uncached": lambda n: (context + n, 0, n + 1),
        "cached": lambda n: (max(n, 1), context, max(n, 1)),
        "cached-standard": lambda n: (n + 1, context, n + 1),
    }
    if regime not in shapes:
        raise ValueError(f"regime {regime!r} is not accepted; give one of {', '.join(shapes)}")
    seconds = tuple(model.pass_seconds(*shapes[regime](n)) for n in range(max_len + 1))
    return PassCosts(model.verifier, model.device, regime, context, seconds, energy_from="the pass-cost model")


def medians(samples: Iterable[Sample]) -> dict[Shape, float]:
    """The median measured seconds per distinct pass shape."""
    by_shape: dict[Shape, list[float]] = defaultdict(list)
    for fed, cached, kept, seconds in samples:
        by_shape[(int(fed), int(cached), int(kept))].append(float(seconds))
    return {shape: float(np.median(ts)) for shape, ts in by_shape.items()}


def nnls(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin |a x - y| over x >= 0, exactly: the best non-negative least-squares solution over every subset of
    columns (2^5 subsets here; scipy is not a dependency)."""
    n = a.shape[1]
    best, best_err = np.zeros(n), float(np.sum(y**2))
    for size in range(1, n + 1):
        for cols in itertools.combinations(range(n), size):
            x, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
            if np.any(x < 0):
                continue
            err = float(np.sum((a[:, cols] @ x - y) ** 2))
            if err < best_err - 1e-15 * max(1.0, best_err):
                best, best_err = np.zeros(n), err
                best[list(cols)] = x
    return best


def fit(samples: Iterable[Sample]) -> dict[str, float]:
    """Coefficients by non-negative least squares on each shape's median, relative (each row divided by its
    median seconds, so the fit minimises relative error); a feature absent from every sample gets 0."""
    points = medians(samples)
    if not points:
        raise ValueError("no timed pass to fit a cost model to")
    shapes = list(points)
    y = np.array([points[s] for s in shapes])
    if np.any(y <= 0):
        raise ValueError("a timed pass took no time; the clock cannot measure these passes")
    x = np.array([features(*s) for s in shapes]) / y[:, None]
    scale = np.abs(x).max(axis=0)
    scale[scale == 0] = 1.0  # an absent feature (e.g. no cached pass) stays 0
    coef = nnls(x / scale, np.ones(len(shapes))) / scale
    return {name: float(c) for name, c in zip(FEATURES, coef)}


def log_spaced(lo: int, hi: int, n: int) -> list[int]:
    """Up to n distinct integers from lo to hi (both included), evenly spaced on a log scale."""
    if hi <= lo or n <= 1:
        return [hi]
    return sorted({round(lo * (hi / lo) ** (i / (n - 1))) for i in range(n)})


@dataclass(frozen=True)
class DesignPoint:
    """One pass to time: `kind` "uncached" (a full forward over `context` tokens keeping `n` rows), "prefill" (a
    fresh cache over `context`, one row kept) or "extend" (`n` tokens fed after a cache of `context`, all kept)."""

    kind: str
    context: int
    n: int = 1

    @property
    def shape(self) -> Shape:
        """(fed, cached, kept) of this point's timed pass, as `Verifier.last_shape` records it."""
        if self.kind == "extend":
            return (self.n, self.context, self.n)
        return (self.context, 0, 1 if self.kind == "prefill" else self.n)


def design(max_fed: int = 17, max_context: int = 160, min_context: int = 8, n_contexts: int = 4) -> list[DesignPoint]:
    """The grid the sweep's passes lie in, per context length (log-spaced): uncached forwards keeping 1..max_fed
    rows, a prefill, and cached extends of 1..max_fed tokens after it (log-spaced). Each context's extends follow
    its prefill, which leaves the cache they extend."""
    lengths = log_spaced(1, max_fed, 5)
    kept = log_spaced(1, max_fed, 3)  # 1, 4, 17 for max_fed 17: the uncached points are the dearest
    points = []
    for c in log_spaced(min_context, max_context, n_contexts):
        points += [DesignPoint("uncached", c, n) for n in kept if n <= c]
        points += [DesignPoint("prefill", c)] + [DesignPoint("extend", c, n) for n in lengths]
    return points


def run_point(verifier: Verifier, tokens: Sequence[int], p: DesignPoint) -> Sample:
    """Time one design point's pass between device syncs; its shape as the verifier recorded it. An extend runs
    after a cache of exactly `p.context` tokens (prefilled untimed unless the cache holds them) and crops back."""
    if p.kind == "extend" and (verifier.cache is None or verifier.cached_len != p.context):
        verifier.prefill(tokens[: p.context], 1)
    verifier.sync()
    t0 = time.perf_counter()
    if p.kind == "uncached":
        verifier.logits(tokens[: p.context], p.n)
    elif p.kind == "prefill":
        verifier.prefill(tokens[: p.context], 1)
    else:
        verifier.extend(tokens[p.context : p.context + p.n])
    verifier.sync()
    seconds = time.perf_counter() - t0
    if p.kind == "extend":
        verifier.crop(p.context)
    return (*verifier.last_shape, seconds)


def time_points(
    verifier: Verifier,
    tokens: Sequence[int],
    points: Sequence[DesignPoint],
    repeats: int = REPEATS,
    budget_s: float | None = None,
) -> list[Sample]:
    """`repeats` rounds over every point (after one untimed warm round), each round running them all in turn, so a
    busy spell slows every point alike; a round that would end past `budget_s` is not started (one always runs)."""
    verifier.cache = None  # an extend's cache is always the design's own
    for p in points:  # warm: allocation and first-call costs, not timed
        run_point(verifier, tokens, p)
    samples: list[Sample] = []
    t0 = time.perf_counter()
    for r in range(max(1, repeats)):
        elapsed = time.perf_counter() - t0
        if r and budget_s is not None and elapsed + elapsed / r > budget_s:
            logger.info("cost model: %d of %d rounds within %.0f s", r, repeats, budget_s)
            break
        samples += [run_point(verifier, tokens, p) for p in points]
    verifier.cache = None
    return samples


def measure_pass_costs(
    verifier: Verifier,
    context_ids: Sequence[int],
    max_fed: int = 17,
    max_context: int | None = None,
    repeats: int = REPEATS,
    budget_s: float | None = None,
) -> tuple[PassCostModel, list[Sample]]:
    """Time the verifier's passes over the design grid (contexts up to `max_context` tokens: the prompt plus the
    new tokens a sweep generates; `context_ids` repeated where it is shorter) and fit the model to them."""
    ids = [int(t) for t in context_ids]
    if not ids:
        raise ValueError("measure_pass_costs needs a non-empty context")
    max_context = max_context or len(ids)
    tokens = (ids * math.ceil((max_context + max_fed) / len(ids)))[: max_context + max_fed]
    points = design(max_fed, max_context, min(8, max_context))
    samples = time_points(verifier, tokens, points, repeats, budget_s)
    model = PassCostModel(verifier_name(verifier), str(verifier.device), fit(samples))
    logger.info(
        "cost model %s on %s from %d passes: %s", model.verifier, model.device, len(samples), model.coefficients
    )
    return model, samples


def tokens_per_s_errors(predicted_wall_s: Sequence[float], measured_wall_s: Sequence[float]) -> np.ndarray:
    """|predicted / measured - 1| of tokens/s per generation: the same tokens, so measured_s / predicted_s - 1."""
    pred, meas = np.asarray(predicted_wall_s, float), np.asarray(measured_wall_s, float)
    if pred.shape != meas.shape:
        raise ValueError(f"{len(pred)} predicted wall times against {len(meas)} measured")
    return np.abs(meas / pred - 1.0)


def error_summary(errors: Sequence[float]) -> tuple[float, float]:
    """(median, 90th percentile) of relative errors (linear interpolation between ranks); NaN for none."""
    e = np.asarray(errors, float)
    if e.size == 0:
        return math.nan, math.nan
    return float(np.median(e)), float(np.percentile(e, 90))


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their ranks."""
    v = np.asarray(values, float)
    order = np.argsort(v, kind="stable")
    out = np.empty(len(v))
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        out[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson's of the tie-averaged ranks); NaN under 2 pairs or a constant side."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} values against {len(b)}")
    if len(a) < 2:
        return math.nan
    ra, rb = ranks(a), ranks(b)
    da, db = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float(np.sum(da**2) * np.sum(db**2)))
    return float(np.sum(da * db) / denom) if denom > 0 else math.nan
