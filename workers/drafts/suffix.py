"""The `suffix` draft: SuffixDecoding (Oliaro et al.) through arctic-inference's own `SuffixDecodingCache`.

A suffix tree over the session (prompt and output so far) and, optionally, a global one over earlier outputs
(`remember_outputs=True`) or a corpus (`corpus`: its datastore's tokens). Each round matches the longest suffix
of the context (up to `max_tree_depth` tokens) and proposes the continuation with its adaptive length: at most
`max_spec_factor` x the match length (+ `max_spec_offset`) tokens, stopping where the path's estimated
probability falls under `min_token_prob`, and never more than k. One generation is one request of the cache:
`reset()` ends the previous request (kept in the global tree only when outputs are remembered).

Remembered outputs are those of *other* prompts: a request starting at a prompt first evicts the outputs stored
for that same prompt. A sweep generates each prompt once per k, regime and temperature; without this, every run
after the first would draft the text an earlier run of the same prompt just produced, which a deployment serving
distinct requests never sees.

Example:
    >>> draft = SuffixDraft()
    >>> draft.reset()
    >>> draft.propose([5, 6, 7, 8, 9, 5, 6, 7], k=3)    # "5 6 7" was followed by 8 9
    [8, 9, 5]
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Annotated

import numpy as np
from pydantic import Field

from workers.drafts.registry import BuildContext, DraftEntry, DraftOptions, Requirement
from workers.errors import DraftError
from workers.interfaces import Draft, common_prefix_len

_request_ids = itertools.count()


CORPUS_CHUNK = 4096  # tokens per global-tree entry when a corpus seeds it (a match spans at most max_tree_depth)


def corpus_documents(corpus) -> Iterator[Sequence[int]]:
    """Token sequences from a datastore path (its token row in chunks) or from a sequence of token sequences."""
    if isinstance(corpus, (str, os.PathLike)):
        from workers.training.datastore import Datastore

        tokens = Datastore.open(corpus).tokens
        for start in range(0, tokens.shape[0], CORPUS_CHUNK):
            yield tokens[start : start + CORPUS_CHUNK]
        return
    yield from corpus


def contiguous_ids(ids: Sequence[int]) -> np.ndarray:
    """The 1-D contiguous, writable int32 array arctic-inference's bindings require (a copy: never a memmap view)."""
    return np.array(ids, dtype=np.int32, copy=True).reshape(-1)


def suffix_cache(max_tree_depth: int, keep: bool):
    """A SuffixDecodingCache keeping finished requests in its global tree when `keep` (arctic-inference)."""
    try:
        from arctic_inference.suffix_decoding import SuffixDecodingCache
    except ImportError as err:
        raise DraftError(
            "suffix: arctic-inference is not installed; run `make install` (it builds it from source)"
        ) from err
    return SuffixDecodingCache(max_tree_depth=max_tree_depth, max_cached_requests=-1 if keep else 0)


class SuffixDraft(Draft):
    """SuffixDecoding over the session, earlier outputs (`remember_outputs`) and an optional token corpus."""

    name = "suffix"

    def __init__(
        self,
        max_tree_depth: int = 64,
        max_spec_factor: float = 1.0,
        max_spec_offset: float = 0.0,
        min_token_prob: float = 0.1,
        remember_outputs: bool = False,
        corpus=None,
        max_remembered_outputs: int = 1000,
    ):
        if (
            not (isinstance(max_tree_depth, int) and max_tree_depth >= 1)
            or max_spec_factor <= 0
            or not 0.0 <= min_token_prob <= 1.0
            or not (isinstance(max_remembered_outputs, int) and max_remembered_outputs >= 1)
        ):
            raise DraftError(
                f"suffix: max_tree_depth={max_tree_depth!r}, max_spec_factor={max_spec_factor!r}, "
                f"min_token_prob={min_token_prob!r}, max_remembered_outputs={max_remembered_outputs!r} "
                "not accepted; give an integer depth >= 1, a factor > 0, a probability in [0, 1] and "
                "an integer count >= 1"
            )
        self.max_tree_depth, self.max_spec_factor = max_tree_depth, float(max_spec_factor)
        self.max_spec_offset, self.min_token_prob = float(max_spec_offset), float(min_token_prob)
        self.remember_outputs, self.max_remembered_outputs = remember_outputs, max_remembered_outputs
        self._remembered: deque[tuple[str, tuple[int, ...]]] = deque()  # (request, its prompt) in the global tree,
        # oldest first (the corpus never goes)
        self.cache = suffix_cache(max_tree_depth, keep=remember_outputs or corpus is not None)
        self.corpus_tokens = self._absorb_corpus(corpus) if corpus is not None else 0
        self._rid: str | None = None
        self._seen: list[int] = []
        self._prompt: tuple[int, ...] = ()

    def _absorb_corpus(self, corpus) -> int:
        """Put corpus documents (token sequences, or a datastore path split at its documents) in the global tree."""
        n = 0
        for doc in corpus_documents(corpus):
            rid = f"corpus-{next(_request_ids)}"
            self.cache.start_request(rid, contiguous_ids([]))
            self.cache.add_active_response(rid, contiguous_ids(doc))
            self.cache.stop_request(rid)
            n += len(doc)
        return n

    def reset(self) -> None:
        """End the current request (a new generation is a new request id)."""
        self._stop()

    def _stop(self) -> None:
        if self._rid is not None:
            self.cache.stop_request(self._rid)
            if self.remember_outputs:
                self._remembered.append((self._rid, self._prompt))
                while len(self._remembered) > self.max_remembered_outputs:  # bounded memory: the oldest goes
                    self.cache.evict_cached_response(self._remembered.popleft()[0])
            elif self._rid in self.cache.cached_requests:
                self.cache.evict_cached_response(self._rid)  # the global tree keeps the corpus only
            self._rid, self._seen = None, []

    def _sync(self, context: Sequence[int]) -> None:
        """Start the request at the prompt, or append the tokens added since the last call."""
        if self._rid is not None and common_prefix_len(self._seen, context) < len(self._seen):
            self._stop()  # not a continuation of this request: a new generation without reset()
        if self._rid is None:
            self._seen = [int(t) for t in context]
            self._prompt = tuple(self._seen)
            self._forget(self._prompt)
            self._rid = f"gen-{next(_request_ids)}"
            self.cache.start_request(self._rid, contiguous_ids(context))
            return
        new = context[len(self._seen) :]
        if len(new):
            self.cache.add_active_response(self._rid, contiguous_ids(new))
            self._seen.extend(int(t) for t in new)

    def _forget(self, prompt: tuple[int, ...]) -> None:
        """Evict the remembered outputs of `prompt`: a request never drafts from its own prompt's earlier runs."""
        kept: deque[tuple[str, tuple[int, ...]]] = deque()
        for rid, p in self._remembered:
            if p == prompt:
                self.cache.evict_cached_response(rid)
            else:
                kept.append((rid, p))
        self._remembered = kept

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k tokens: the continuation of the longest matched suffix, cut by the adaptive length."""
        self._sync(context)
        if k <= 0:
            return []
        pattern = contiguous_ids(context[-self.max_tree_depth :])
        draft = self.cache.speculate(
            self._rid,
            pattern,
            max_spec_tokens=k,
            max_spec_factor=self.max_spec_factor,
            max_spec_offset=self.max_spec_offset,
            min_token_prob=self.min_token_prob,
            use_tree_spec=False,
        )
        return [int(t) for t in draft.token_ids][:k]


class SuffixOptions(DraftOptions):
    """SuffixDecoding's knobs (arctic-inference's defaults); `remember_outputs`: a global tree of earlier outputs;
    `max_remembered_outputs`: how many (the newest) it keeps, so its memory is bounded; `corpus`: a [[corpora]]
    entry whose tokens (its datastore) seed the global tree."""

    corpus_fields = ("corpus",)
    max_tree_depth: Annotated[int, Field(ge=1)] = 64
    max_spec_factor: Annotated[float, Field(gt=0)] = 1.0
    max_spec_offset: float = 0.0
    min_token_prob: Annotated[float, Field(ge=0, le=1)] = 0.1
    remember_outputs: bool = False
    max_remembered_outputs: Annotated[int, Field(ge=1)] = 1000
    corpus: str | None = None

    def identity(self) -> dict:
        """As every draft's, but the bound on remembered outputs counts only when outputs are remembered; then
        `remembers` names which (other prompts' only, since a prompt's own were found to leak into its other k's)."""
        out = super().identity()
        if self.remember_outputs:
            out["remembers"] = "other prompts"
        else:
            out.pop("max_remembered_outputs")
        return out

    def requires(self) -> dict[str, Requirement]:
        return {"datastore": Requirement("datastore", self.corpus)} if self.corpus else {}

    def carries_outputs(self) -> bool:
        return self.remember_outputs


def build(opts: SuffixOptions, ctx: BuildContext) -> SuffixDraft:
    return SuffixDraft(
        max_tree_depth=opts.max_tree_depth,
        max_spec_factor=opts.max_spec_factor,
        max_spec_offset=opts.max_spec_offset,
        min_token_prob=opts.min_token_prob,
        remember_outputs=opts.remember_outputs,
        corpus=ctx.artifacts.get("datastore"),
        max_remembered_outputs=opts.max_remembered_outputs,
    )


ENTRY = DraftEntry(
    "suffix",
    SuffixDraft,
    SuffixOptions,
    build,
    summary="SuffixDecoding (arctic-inference): suffix tree over the session, adaptive length",
)
