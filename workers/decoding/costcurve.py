"""The verifier's pass-cost curve (the paper's section 5.1 cost model): c(n) of a round drafting n tokens in one
regime after one context, read off the round-cost table (`workers.decoding.costmodel.RoundCosts.curve`). No torch here: the
dashboard reads it.

Example:
    >>> costs = PassCosts("smollm2", "cpu", "cached", 60, (0.031, 0.031, 0.036, 0.040))
    >>> round(costs.break_even(2), 3)     # the per-token acceptance a 2-token draft needs to pay for its pass
    0.141
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PassCosts:
    """The pass-cost curve of one verifier, device and regime: `seconds[n]` for a pass over n draft tokens."""

    verifier: str
    device: str
    regime: str
    context_tokens: int
    seconds: tuple[float, ...]  # c(n) in seconds, n = 0, 1, ...
    energy_from: str = "time x one mean power"

    def cost(self, n: int) -> float:
        """c(n), extrapolated linearly past the measured lengths."""
        s = self.seconds
        if n < len(s):
            return s[n]
        slope = (s[-1] - s[0]) / max(1, len(s) - 1)
        return s[-1] + slope * (n - len(s) + 1)

    def break_even(self, n: int) -> float:
        """The acceptance a chain of n needs to pay for its longer pass (per-token, geometric): the a with
        (1 + a + ... + a^n) / c(n) = 1 / c(0)."""
        lo, hi = 0.0, 1.0
        for _ in range(40):
            a = (lo + hi) / 2
            gain = sum(a**i for i in range(n + 1)) / self.cost(n) - 1 / self.cost(0)
            lo, hi = (a, hi) if gain < 0 else (lo, a)
        return hi


def verifier_name(verifier) -> str:
    """A verifier's identity for its curve (and its round-cost table): the model's name or path and its dtype."""
    return f"{getattr(verifier.model.config, '_name_or_path', '?')}:{verifier.dtype}"
