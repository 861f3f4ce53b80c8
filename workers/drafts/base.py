"""The draft protocol: propose up to k next tokens for a context, in the verifier's token ids.

Example:
    >>> draft = make_draft("ngram", n=4)
    >>> draft.reset()
    >>> draft.propose([5, 6, 7, 8, 5, 6, 7], k=3)   # the session has seen 5 6 7 -> 8 once
    [8, 5, 6]
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


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def continuation_ids(tokenizer, text: str, continuation: str) -> list[int]:
    """The ids `continuation` adds after `text` when the two are encoded together (empty if they merge back).

    Encoding the joint text keeps the tokenizer's own word-boundary handling; if the joint encoding does not
    start with `text`'s encoding (the continuation fused with the last token), there is no safe proposal.
    """
    base = tokenizer.encode(text, add_special_tokens=False)
    full = tokenizer.encode(text + continuation, add_special_tokens=False)
    if common_prefix_len(base, full) < len(base):
        return []
    return list(full[len(base) :])
