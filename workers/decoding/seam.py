"""The verifier seam: what the rounds ask of a verifier, and all they ask.

`workers.verifier.Verifier` (a transformers causal LM) implements it, and so does replay's stand-in
(`workers.replay.verifier.ReferenceVerifier`), whose greedy tokens are read off a stored reference; the rounds
cannot tell them apart, which is why a replayed generation makes a timed one's rounds and passes.

Every pass returns logits (rows, V) of its last `keep` positions (all of them when keep is 0) and records its
shape (tokens fed, tokens cached, rows kept) in `last_shape`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch


class VerifierLike(Protocol):
    """A verifier as the rounds use it: uncached passes, a KV cache to fill and cut, token-tree passes."""

    vocab_size: int
    last_shape: tuple[int, int, int]

    @property
    def dtype(self) -> torch.dtype:
        """The dtype attention masks are built in."""
        ...

    def sync(self) -> None:
        """Wait for queued work, so a clock read after it measures finished work."""

    def logits(self, ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """Uncached: one full forward over `ids`."""
        ...

    def prefill(self, ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """A fresh cache holding `ids`."""
        ...

    def extend(self, new_ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """`new_ids` fed after the cached tokens."""
        ...

    def masked(
        self, ids: Sequence[int], positions: Sequence[int], mask: torch.Tensor, cache: str, keep: int = 0
    ) -> torch.Tensor:
        """A token-tree pass under a 4-D additive mask; cache "none", "fresh" or "extend"."""
        ...

    def keep_rows(self, n_prefix: int, rows: Sequence[int]) -> None:
        """Keep the cache's first `n_prefix` tokens, then only those at `rows`."""

    def crop(self, n_tokens: int) -> None:
        """Cut the cache back to its first `n_tokens` tokens."""
