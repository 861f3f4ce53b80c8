"""Energy efficiency figures of one generation: J per 100 tokens, tokens per joule, mean watts.

Each returns None when the figure is undefined (no tokens, no energy, no time), which storage keeps as NULL.

Example:
    >>> j_per_100_tokens(50.0, 200), tokens_per_j(50.0, 200), mean_power_w(50.0, 2.0)
    (25.0, 4.0, 25.0)
"""

from __future__ import annotations


def j_per_100_tokens(energy_j: float | None, n_tokens: int) -> float | None:
    """Joules per 100 generated tokens (the paper's headline energy figure)."""
    if energy_j is None or n_tokens <= 0:
        return None
    return energy_j / n_tokens * 100.0


def tokens_per_j(energy_j: float | None, n_tokens: int) -> float | None:
    """Generated tokens per joule (the paper's Figure 2 ladder)."""
    if energy_j is None or energy_j <= 0 or n_tokens < 0:
        return None
    return n_tokens / energy_j


def mean_power_w(energy_j: float | None, wall_s: float) -> float | None:
    """Mean watts over a span of `wall_s` seconds."""
    if energy_j is None or wall_s <= 0:
        return None
    return energy_j / wall_s
