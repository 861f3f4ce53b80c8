"""What decoding and the drafts share, so that neither imports the other: the draft protocol, its null object
(plain greedy's draft, which proposes nothing) and the id arithmetic both use. `workers.decoding` drives any `Draft`;
`workers.drafts` implements them (and may use decoding's token trees, sampling and length policies).

Example:
    >>> class Repeat(Draft):   # guesses that the last k tokens come again
    ...     def propose(self, context, k):
    ...         return list(context[-k:])
    >>> Repeat().propose([5, 6, 7, 8], k=2), PlainDraft().propose([5, 6, 7, 8], k=2)
    ([7, 8], [])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence


class Draft(ABC):
    """A draft model: cheap guesses of the verifier's next tokens, checked by the verifier."""

    name: str = "draft"
    bridged: bool = False  # True when drafts go through text (decode, re-encode) to reach the verifier's ids

    def reset(self) -> None:
        """Forget per-generation state; called at the start of every generation."""

    @abstractmethod
    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k guesses of the tokens that follow `context` (verifier ids; fewer or none is allowed)."""


class PlainDraft(Draft):
    """No draft at all: the reference every speedup is measured against."""

    name = "plain"

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Nothing to propose."""
        return []


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
