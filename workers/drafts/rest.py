"""The `rest` draft: REST's retrieval (He et al., 2024) from a corpus datastore (`workers.training.datastore`).

The longest suffix of the context (up to `max_match` = 16 tokens, at least `min_match` = 2, as REST's token spans)
found in the corpus's suffix array; the continuations of its first `max_occurrences` occurrences counted into a
trie; the trie's most frequent path as the k-token draft. REST verifies the whole trie with tree attention; a
linear verifier takes its heaviest path. The datastore is memory-mapped, shared through the page cache.

Example:
    >>> draft = RestDraft(datastore="runs/artifacts/plays-3f9c0a1b2d4e.rest.npy")
    >>> draft.propose(context_ids, k=3)
    [1014, 272, 907]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Annotated

from pydantic import Field, model_validator

from workers.drafts.registry import BuildContext, DraftEntry, DraftOptions, Requirement
from workers.errors import DraftError
from workers.interfaces import Draft
from workers.training.datastore import Datastore, DatastoreError


class RestDraft(Draft):
    """Retrieval draft over a datastore (a path or an opened `Datastore`); stateless."""

    name = "rest"

    def __init__(self, datastore, max_match: int = 16, min_match: int = 2, max_occurrences: int = 5000):
        if isinstance(datastore, (str, os.PathLike)):
            try:
                datastore = Datastore.open(datastore)
            except DatastoreError as err:
                raise DraftError(f"rest: {err}") from err
        if not isinstance(datastore, Datastore):
            raise DraftError(f"rest: datastore={type(datastore).__name__} is not accepted; give a datastore path")
        if not 1 <= min_match <= max_match or max_occurrences < 1:
            raise DraftError(
                f"rest: min_match={min_match}, max_match={max_match}, max_occurrences={max_occurrences} "
                "not accepted; give 1 <= min_match <= max_match and max_occurrences >= 1"
            )
        self.store = datastore
        self.max_match, self.min_match, self.max_occurrences = max_match, min_match, max_occurrences

    @property
    def index_bytes(self) -> int:
        """Size of the datastore file (tokens and suffix array), memory-mapped."""
        return int(self.store.tokens.nbytes + self.store.sa.nbytes)

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k tokens: the heaviest trie path after the longest context suffix found in the corpus."""
        return self.store.draft(context, k, self.max_match, self.min_match, self.max_occurrences)


class RestOptions(DraftOptions):
    """`corpus`: the [[corpora]] entry whose datastore retrieves; `max_match`/`min_match`: suffix lengths tried;
    `max_occurrences`: occurrences whose continuations are counted (REST: 5000)."""

    corpus_fields = ("corpus",)
    corpus: str
    max_match: Annotated[int, Field(ge=1)] = 16
    min_match: Annotated[int, Field(ge=1)] = 2
    max_occurrences: Annotated[int, Field(ge=1)] = 5000

    @model_validator(mode="after")
    def _ordered(self):
        if self.min_match > self.max_match:
            raise ValueError(f"min_match={self.min_match} exceeds max_match={self.max_match}")
        return self

    def requires(self) -> dict[str, Requirement]:
        return {"datastore": Requirement("datastore", self.corpus)}


def build(opts: RestOptions, ctx: BuildContext) -> RestDraft:
    return RestDraft(
        datastore=ctx.artifacts["datastore"],
        max_match=opts.max_match,
        min_match=opts.min_match,
        max_occurrences=opts.max_occurrences,
    )


ENTRY = DraftEntry(
    "rest", RestDraft, RestOptions, build, summary="REST: retrieval from a corpus suffix array, heaviest trie path"
)
