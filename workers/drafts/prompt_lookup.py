"""The `lookup` draft (module prompt_lookup: `workers.drafts.lookup` is the registry function): prompt lookup decoding
exactly as transformers' `PromptLookupCandidateGenerator` does it.

The last n tokens of the context (n from `max_ngram` down to `min_ngram`) are searched in the whole context,
left to right; the first occurrence with at least one token after it gives the draft: the up to k tokens that
follow it. The occurrence at the very end (no token after it) is skipped, as transformers skips it; a match near
the end gives fewer than k tokens. No state: the context is the session (prompt and output so far).

Example:
    >>> LookupDraft().propose([4, 5, 6, 7, 5, 6], k=3)   # "5 6" first occurs at 1, followed by 7 5 6
    [7, 5, 6]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import numpy as np
from pydantic import Field, model_validator

from workers.drafts.registry import BuildContext, DraftEntry, DraftOptions
from workers.errors import DraftError
from workers.interfaces import Draft


def first_continuation(ids: np.ndarray, n: int, k: int) -> np.ndarray | None:
    """The up to k tokens after the leftmost occurrence of `ids`' last n tokens that has a token after it."""
    length = ids.shape[0]
    windows = np.lib.stride_tricks.sliding_window_view(ids, n)  # (length - n + 1, n)
    starts = np.flatnonzero((windows == ids[length - n :]).all(axis=1))
    starts = starts[starts + n < length]  # a match must have a token after it
    if starts.size == 0:
        return None
    begin = int(starts[0]) + n
    return ids[begin : min(begin + k, length)]


def lookup_draft(context: Sequence[int], k: int, max_ngram: int = 2, min_ngram: int = 1) -> list[int]:
    """Prompt lookup: the continuation of the longest (max_ngram..min_ngram) suffix n-gram's first earlier match."""
    ids = np.asarray(context, dtype=np.int64)
    for n in range(min(max_ngram, ids.shape[0] - 1), min_ngram - 1, -1):
        found = first_continuation(ids, n, k)
        if found is not None:
            return [int(t) for t in found]
    return []


class LookupDraft(Draft):
    """Prompt lookup decoding (transformers' `prompt_lookup_num_tokens`); stateless."""

    name = "lookup"

    def __init__(self, max_ngram: int = 2, min_ngram: int = 1):
        if not isinstance(max_ngram, int) or not isinstance(min_ngram, int) or not 1 <= min_ngram <= max_ngram:
            raise DraftError(
                f"lookup: max_ngram={max_ngram!r}, min_ngram={min_ngram!r} not accepted; "
                "give integers with 1 <= min_ngram <= max_ngram"
            )
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k tokens copied from the context after an earlier occurrence of its last n-gram."""
        if k <= 0:
            return []
        return lookup_draft(context, k, self.max_ngram, self.min_ngram)


class LookupOptions(DraftOptions):
    """`max_ngram`/`min_ngram`: the suffix n-gram sizes searched, longest first (transformers: 2 and 1)."""

    max_ngram: Annotated[int, Field(ge=1)] = 2
    min_ngram: Annotated[int, Field(ge=1)] = 1

    @model_validator(mode="after")
    def _ordered(self):
        if self.min_ngram > self.max_ngram:
            raise ValueError(f"min_ngram={self.min_ngram} exceeds max_ngram={self.max_ngram}")
        return self


def build(opts: LookupOptions, ctx: BuildContext) -> LookupDraft:
    return LookupDraft(max_ngram=opts.max_ngram, min_ngram=opts.min_ngram)


ENTRY = DraftEntry(
    "lookup",
    LookupDraft,
    LookupOptions,
    build,
    summary="prompt lookup: copy what followed the last n-gram earlier in the context",
)
