"""The verifier's round-cost table: measured seconds of the verifier's side of a real round, per regime, pass kind and
width, over context length, on one device. The one cost model: replay's predictions, k = "auto" and the Cost model
page all read it. No torch here (`workers.decoding.roundtimer` measures it).

A replayed generation makes exactly the passes a timed one makes but runs no verifier: its wall time is the table's
seconds for each of its recorded passes (`workers.decoding.passes` names the round each pass was) plus its draft's own
measured seconds. A row of the table is one `(regime, kind, n)`: the median seconds of repeated timed rounds at a few
context lengths (log-spaced over the run's). Between them the table interpolates linearly on the medians made
monotone in context (pool-adjacent-violators: a longer context never costs less); past the longest it follows the
last segment's slope, before the shortest it stays at the first. A width the table lacks is interpolated (or
extrapolated) linearly in n at that context; a tree width it lacks is the chain of that width times the ratio of the
nearest measured tree to its chain (the chain itself where no tree was measured).

The row for n measures the step from one row to two as it is: nothing is assumed linear in the tokens fed.

Example:
    >>> t = RoundCosts("v", "cpu", {"cached/chain/0": ((40, 0.030), (120, 0.034)), "cached/first/0": ((40, 0.09),)})
    >>> round(t.seconds("cached", "chain", 0, 80), 4), round(t.wall_seconds("cached", [(40, 0, 1), (1, 40, 1)]), 4)
    (0.032, 0.12)
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from workers.decoding.costcurve import PassCosts
from workers.decoding.passes import Shape, regime_passes

Sample = tuple[str, str, int, int, float]  # (regime, kind, n, context, seconds) of one timed round
Row = tuple[tuple[int, float], ...]  # ((context, median seconds), ...) by context
TREE_FALLBACK = {"tree": "chain", "tree-first": "first"}  # the chain rows a missing tree width is read from


def row_name(regime: str, kind: str, n: int) -> str:
    """The table's name of a row: "regime/kind/n"."""
    return f"{regime}/{kind}/{int(n)}"


@lru_cache(maxsize=4096)
def monotone(row: Row) -> Row:
    """The row's medians made non-decreasing in context by pool-adjacent-violators (least squares, equal weights)."""
    blocks: list[list[float]] = []  # [sum, count] per pooled block
    for _, s in row:
        blocks.append([s, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    values = [b[0] / b[1] for b in blocks for _ in range(int(b[1]))]
    return tuple((c, v) for (c, _), v in zip(row, values))


def interpolate(row: Row, context: float) -> float:
    """The monotone row's seconds at `context`: linear between measured contexts, the last slope past them."""
    pts = monotone(row)
    if len(pts) == 1 or context <= pts[0][0]:
        return pts[0][1]
    for (c0, s0), (c1, s1) in zip(pts, pts[1:]):
        if context <= c1:
            return s0 + (s1 - s0) * (context - c0) / (c1 - c0)
    (c0, s0), (c1, s1) = pts[-2], pts[-1]
    return s1 + (s1 - s0) * (context - c1) / (c1 - c0)


@dataclass(frozen=True)
class RoundCosts:
    """Seconds of the verifier's side of a round on one device, per `row_name`, over context (see the module doc).

    `meta` describes what it was measured on (dtype, threads, torch, machine); `noise` is, per regime, the median
    |seconds / row median - 1| of the table's own repeated rounds."""

    verifier: str
    device: str
    rows: Mapping[str, Row]
    noise: Mapping[str, float] = field(default_factory=dict)
    meta: Mapping[str, object] = field(default_factory=dict)
    # a pass shape's seconds, once computed: a run predicts 10^5-10^6 generations over a few thousand shapes
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def widths(self, regime: str, kind: str) -> list[int]:
        """The measured n of one regime's kind of pass."""
        prefix = f"{regime}/{kind}/"
        return sorted(int(name[len(prefix) :]) for name in self.rows if name.startswith(prefix))

    def seconds(self, regime: str, kind: str, n: int, context: float) -> float:
        """Predicted seconds of the verifier's side of a round (see the module doc for the fallbacks)."""
        name = row_name(regime, kind, n)
        if name in self.rows:
            return interpolate(self.rows[name], context)
        ns = self.widths(regime, kind)
        if kind in TREE_FALLBACK:  # the chain of n, scaled as the nearest measured tree is to its chain
            chain = self.seconds(regime, TREE_FALLBACK[kind], n, context)
            if not ns:
                return chain
            m = min(ns, key=lambda m: (abs(m - n), m))
            base = self.seconds(regime, TREE_FALLBACK[kind], m, context)
            return chain * interpolate(self.rows[row_name(regime, kind, m)], context) / base if base > 0 else chain
        if not ns:
            raise KeyError(f"the round-cost table of {self.verifier} on {self.device} has no {regime} {kind} passes")
        if len(ns) == 1:
            return interpolate(self.rows[row_name(regime, kind, ns[0])], context)
        if n < ns[0]:
            lo, hi = ns[0], ns[1]
        elif n > ns[-1]:
            lo, hi = ns[-2], ns[-1]
        else:
            lo, hi = max(m for m in ns if m < n), min(m for m in ns if m > n)
        s_lo, s_hi = (interpolate(self.rows[row_name(regime, kind, m)], context) for m in (lo, hi))
        return max(0.0, s_lo + (s_hi - s_lo) * (n - lo) / (hi - lo))

    def pass_seconds(self, regime: str, shape: Shape, tree: bool = False) -> float:
        """Predicted seconds of the round a recorded pass shape was (`workers.decoding.passes`)."""
        memo = (regime, tuple(shape), tree)
        if (found := self._memo.get(memo)) is None:
            kind, n, context = regime_passes(regime).key(shape, tree)
            found = self._memo[memo] = self.seconds(regime, kind, n, context)
        return found

    def wall_seconds(self, regime: str, passes: Iterable[Sequence[int]], tree: bool = False) -> float:
        """Predicted seconds of a generation's verifier side, over its passes [(fed, cached, kept), ...]."""
        return sum(self.pass_seconds(regime, tuple(p), tree) for p in passes)

    def curve(self, regime: str, context: int, max_len: int = 8, tree: bool = False) -> PassCosts:
        """c(0..max_len): a round drafting n after `context` tokens in `regime`, for k = "auto" and the break-even."""
        passes = regime_passes(regime)
        seconds = tuple(self.pass_seconds(regime, passes.shape(n, context), tree) for n in range(max_len + 1))
        return PassCosts(self.verifier, self.device, regime, context, seconds, energy_from="the round-cost table")

    def to_json(self) -> str:
        rows = {name: [list(p) for p in row] for name, row in self.rows.items()}
        raw = {"verifier": self.verifier, "device": self.device, "rows": rows}
        return json.dumps(raw | {"noise": dict(self.noise), "meta": dict(self.meta)})

    @classmethod
    def from_json(cls, text: str | Mapping) -> RoundCosts:
        raw = json.loads(text) if isinstance(text, str) else dict(text)
        if "rows" not in raw:
            raise ValueError("not a round-cost table (an older linear pass-cost model?): measure the table again")
        rows = {str(n): tuple((int(c), float(s)) for c, s in row) for n, row in raw["rows"].items()}
        noise = {str(k): float(v) for k, v in raw.get("noise", {}).items()}
        return cls(str(raw["verifier"]), str(raw["device"]), rows, noise, dict(raw.get("meta", {})))


def table_rows(samples: Iterable[Sample]) -> dict[str, Row]:
    """The median seconds per row and context of timed rounds."""
    by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for regime, kind, n, context, seconds in samples:
        by[row_name(regime, kind, n)][int(context)].append(float(seconds))
    return {name: tuple((c, float(np.median(ts))) for c, ts in sorted(cs.items())) for name, cs in by.items()}


def repeat_noise(samples: Iterable[Sample]) -> dict[str, float]:
    """Per regime, the median |seconds / its row and context's median - 1| over rounds timed more than once."""
    by: dict[tuple, list[float]] = defaultdict(list)
    for regime, kind, n, context, seconds in samples:
        by[(regime, kind, n, int(context))].append(float(seconds))
    dev: dict[str, list[float]] = defaultdict(list)
    for (regime, *_), ts in by.items():
        if len(ts) > 1:
            med = float(np.median(ts))
            dev[regime] += [abs(t / med - 1) for t in ts] if med > 0 else []
    return {regime: float(np.median(d)) for regime, d in dev.items() if d}


def build_table(verifier: str, device: str, samples: Sequence[Sample], meta: Mapping | None = None) -> RoundCosts:
    """The table of these timed rounds, with its own repeat noise."""
    if not samples:
        raise ValueError("no timed round to build a round-cost table from")
    if any(s[4] <= 0 for s in samples):
        raise ValueError("a timed round took no time; the clock cannot measure these rounds")
    return RoundCosts(verifier, device, table_rows(samples), repeat_noise(samples), dict(meta or {}))


@dataclass(frozen=True)
class Turn:
    """One turn of a table measured in turns: its verifier and device, its rounds, its own table's meta (pace,
    machine), its seconds and the mean power measured meanwhile (None: no meter)."""

    verifier: str
    device: str
    samples: Sequence[Sample]
    meta: Mapping
    measure_s: float
    power_w: float | None = None


def turns_table(earlier: RoundCosts | None, earlier_samples: Sequence[Sample], turn: Turn) -> RoundCosts:
    """The table of every turn so far: `earlier` (the table of the turns before, built by this function, or None)
    and its rounds, with one more turn. Built from all their rounds (each row's median at each context over every
    turn); its meta is the newest turn's, with the pace over all (`pace_s`, the median of every turn's runs), the
    turns' count, seconds and power, and the mean power over all of them, weighted by their seconds (`mean_power_w`,
    what its predictions' energy is at; absent if no turn had a meter)."""
    before = dict(earlier.meta) if earlier is not None else {}
    paces = [*before.get("pace_runs", []), *turn.meta.get("pace_runs", [])]
    seconds = [*before.get("turn_s", []), float(turn.measure_s)]
    powers = [*before.get("turn_power_w", []), turn.power_w]
    meta = dict(turn.meta) | {"turns": len(seconds), "turn_s": seconds, "turn_power_w": powers, "pace_runs": paces}
    if paces:
        meta["pace_s"] = float(np.median(paces))
    metered = [(p, s) for p, s in zip(powers, seconds) if p is not None]
    if sum(s for _, s in metered) > 0:
        meta["mean_power_w"] = sum(p * s for p, s in metered) / sum(s for _, s in metered)
    return build_table(turn.verifier, turn.device, [*earlier_samples, *turn.samples], meta)


def predict_generation(
    table: RoundCosts, regime: str, passes: Iterable[Sequence[int]], draft_s: float, tree: bool = False
) -> float:
    """A replayed generation's wall seconds: its rounds' predicted cost plus its draft's own measured seconds."""
    return table.wall_seconds(regime, passes, tree) + draft_s


def log_spaced(lo: int, hi: int, n: int) -> list[int]:
    """Up to n distinct integers from lo to hi (both included), evenly spaced on a log scale."""
    if hi <= lo or n <= 1:
        return [hi]
    return sorted({round(lo * (hi / lo) ** (i / (n - 1))) for i in range(n)})


PACE_WINDOW = 5  # timings, in run order, whose median pace sets one of them at the table's pace


def pace_ratios(paces: Sequence[float | None], table_pace: float | None, window: int = PACE_WINDOW) -> np.ndarray:
    """Per timing in run order: the machine's pace then over the table's (`workers.decoding.roundtimer.pace_seconds`),
    the median over `window` timings centred on it (the drift is slow, one pace is jittery); 1.0 where not known."""
    if not table_pace or not len(paces):
        return np.ones(len(paces))
    ratio = pd.Series([np.nan if p is None else float(p) for p in paces]) / float(table_pace)
    return ratio.rolling(window, center=True, min_periods=1).median().fillna(1.0).to_numpy()


def tokens_per_s_errors(predicted_wall_s: Sequence[float], measured_wall_s: Sequence[float]) -> np.ndarray:
    """|predicted / measured - 1| of tokens/s per generation: the same tokens, so measured_s / predicted_s - 1."""
    pred, meas = np.asarray(predicted_wall_s, float), np.asarray(measured_wall_s, float)
    if pred.shape != meas.shape:
        raise ValueError(f"{len(pred)} predicted wall times against {len(meas)} measured")
    return np.abs(meas / pred - 1.0)


BIAS_LIMIT = 0.03  # the |median signed error| a table may show and still be within the noise


def table_error(median_error: float, noise: float) -> float:
    """The part of a median |error| that one timing's noise does not explain: sqrt(max(0, error^2 - noise^2)).

    A timing's own noise and the table's error are independent and add in quadrature: against one timing an exact
    table's median error is the noise itself (|t2 / t1 - 1| / sqrt 2 has the same median as one timing's
    deviation), so what the table adds is the rest. NaN where either is unknown."""
    if not (median_error == median_error and noise == noise):
        return math.nan
    return math.sqrt(max(0.0, median_error**2 - noise**2))


def within_noise(median_error: float, bias: float, noise: float) -> bool | None:
    """Whether a table predicts within the timing noise: its own error (`table_error`) no larger than the noise
    (the median error at most sqrt 2 x the noise) and |bias| <= BIAS_LIMIT; None where the noise is unknown.

    `median error <= noise` alone is a coin toss for an exact table (both medians estimate one timing's deviation),
    so it would fail a perfect table about half the time; this asks that the table add no more than a timing's own
    noise, and it fails a table whose own error exceeds it (tests/workers/decoding/test_costmodel.py)."""
    own = table_error(median_error, noise)
    if own != own or bias != bias:
        return None
    return own <= noise and abs(bias) <= BIAS_LIMIT


VERDICT_BOOTSTRAP = 2000  # resamples behind a miss's interval (seeded: the same pairs give the same verdict)
MIN_VERDICT_PAIRS = 3  # fewer pairs or generations timed twice than this: "unresolved" (one noise figure is a guess)


def noise_verdict(errors: Sequence[float], noise: Sequence[float], paired: bool = False, seed: int = 0) -> str | None:
    """Whether a table predicts within the timing noise, from the pairs' signed errors (predicted / measured - 1 of
    tokens/s) and the generations timed twice (|t2 / t1 - 1| / sqrt 2 each): "yes" where `within_noise` holds at the
    medians; else "no" where the pairs show the miss (the 95% bootstrap interval of the table's own error less the
    noise lies above 0, or that of the bias beyond +-BIAS_LIMIT); else "unresolved": the point misses, but as few
    pairs as these cannot tell it from an exact table's luck; "unresolved" too under MIN_VERDICT_PAIRS on either side
    (a median of one or two figures has no spread to resample). None where either side is empty.

    Six pairs' medians are rough: an exact table fails `within_noise` in about a quarter of 6-pair bands (so a grid of
    36 bands would all pass about once in 20,000 runs); it is (almost) never shown a miss, and one whose own error is
    4x the noise is shown one in about 4 bands in 10 at 6 pairs, 9 in 10 at 30 (tests/workers/decoding/test_costmodel.py).
    `paired`: the noise comes from the same generations as the errors (resampled together)."""
    e, nz = np.asarray(errors, float), np.asarray(noise, float)
    if paired and nz.size != e.size:
        raise ValueError(f"paired noise needs one figure per pair: {nz.size} for {e.size}")
    if not (e.size and nz.size):
        return None
    if min(e.size, nz.size) < MIN_VERDICT_PAIRS:
        return "unresolved"
    bias = float(np.median(e))
    if within_noise(float(np.median(np.abs(e))), bias, float(np.median(nz))):
        return "yes"
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, e.size, (VERDICT_BOOTSTRAP, e.size))
    nz_picks = picks if paired else rng.integers(0, nz.size, (VERDICT_BOOTSTRAP, nz.size))
    med, noise_med = np.median(np.abs(e)[picks], axis=1), np.median(nz[nz_picks], axis=1)
    beyond = np.sqrt(np.maximum(0.0, med**2 - noise_med**2)) - noise_med
    lo, (b_lo, b_hi) = np.percentile(beyond, 2.5), np.percentile(np.median(e[picks], axis=1), [2.5, 97.5])
    return "no" if lo > 0 or b_lo > BIAS_LIMIT or b_hi < -BIAS_LIMIT else "unresolved"


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
