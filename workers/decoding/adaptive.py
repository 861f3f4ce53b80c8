"""Adaptive draft length, the confidence stop rule: draft while the draft is confident enough, `k` the maximum.

A draft that can score its own guesses gives each one a confidence in [0, 1] (an IGTree's match depth over
its window, a session match's length over its longest context, a neural draft's probability). Drafting
stops at the first guess whose *estimated acceptance* is below `threshold`, so a round may draft fewer than
k tokens or none; in the cached regime an empty proposal is a plain one-token pass, so this decides per round
whether drafting is worth a pass.

The estimate is the confidence itself (static) or, with `online = True`, the confidence moved toward the
acceptance observed in this generation at the same confidence level: (accepted + s * confidence) /
(reached + s), s = `PRIOR_WEIGHT`, where a guess was *reached* when every guess before it in its round was
accepted. The draft sees no verdicts: it infers them from how the context grew since its last proposal (the
accepted guesses are the common prefix of the proposal and the new tokens). Statistics restart with every
generation (`reset`), so a cell's result does not depend on which cells ran before it. A draft's options turn it on
(`workers.drafts.adaptive.AdaptiveOptions`); the cost-model length (k = "auto") is `workers.decoding.autok`.

Example:
    >>> gate = AdaptiveLength(threshold=0.5)
    >>> gate.cut([(11, 1.0), (12, 0.75), (13, 0.25), (14, 1.0)])    # stops at the first estimate < 0.5
    [11, 12]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from workers.interfaces import common_prefix_len

PRIOR_WEIGHT = 4.0  # observations worth as much as the confidence prior at one level
LEVELS = 20  # confidences are binned to 1/LEVELS for the online statistics


def stop_rule(scored: Sequence[tuple[int, float]], threshold: float) -> list[int]:
    """The tokens before the first one whose score is below `threshold` (the adaptive stop rule)."""
    out = []
    for token, score in scored:
        if score < threshold:
            break
        out.append(int(token))
    return out


def level(confidence: float) -> int:
    """The bin of a confidence in [0, 1] for the online statistics."""
    return min(LEVELS, max(0, round(float(confidence) * LEVELS)))


def accepted_count(proposal: Sequence[int], new_tokens: Sequence[int]) -> int:
    """How many proposed tokens the verifier accepted, inferred from the tokens the context gained."""
    return common_prefix_len(proposal, new_tokens)


@dataclass
class AdaptiveLength:
    """The stop rule with an optional online estimate of acceptance per confidence level."""

    threshold: float
    online: bool = False
    _reached: dict[int, int] = field(default_factory=dict)
    _accepted: dict[int, int] = field(default_factory=dict)
    _last: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # (context, proposal) of the previous call
    _confidences: list[float] = field(default_factory=list)  # of the previous proposal's guesses

    def reset(self) -> None:
        """A new generation: forget the statistics and the previous proposal."""
        self._reached, self._accepted, self._last, self._confidences = {}, {}, None, []

    def estimate(self, confidence: float) -> float:
        """The estimated acceptance of a guess at this confidence (the confidence itself unless online)."""
        if not self.online:
            return float(confidence)
        b = level(confidence)
        reached = self._reached.get(b, 0)
        return (self._accepted.get(b, 0) + PRIOR_WEIGHT * confidence) / (reached + PRIOR_WEIGHT)

    def observe(self, context: Sequence[int]) -> None:
        """Learn from the previous proposal's fate, read off how `context` grew since it (online mode only)."""
        if not self.online or self._last is None:
            return
        before, proposal = self._last
        if len(context) <= len(before) or tuple(context[: len(before)]) != before:
            return  # not a continuation of the previous call (a new prompt): nothing to learn
        n = accepted_count(proposal, context[len(before) :])
        for i, conf in enumerate(self._confidences[: n + 1]):  # guesses after a rejection were never reached
            b = level(conf)
            self._reached[b] = self._reached.get(b, 0) + 1
            self._accepted[b] = self._accepted.get(b, 0) + (i < n)

    def cut(self, scored: Sequence[tuple[int, float]], context: Sequence[int] = ()) -> list[int]:
        """The guesses kept by the stop rule on their estimated acceptance; remembers them for `observe`."""
        kept = stop_rule([(t, self.estimate(c)) for t, c in scored], self.threshold)
        if self.online:
            self._confidences = [c for _, c in scored[: len(kept)]]
            self._last = (tuple(int(t) for t in context), tuple(kept)) if kept else None
        return kept
