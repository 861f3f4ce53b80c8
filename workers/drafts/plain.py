"""The `plain` draft: proposes nothing, so the verifier decodes one token per forward pass."""

from __future__ import annotations

from collections.abc import Sequence

from workers.drafts.base import Draft
from workers.drafts.registry import BuildContext, DraftEntry, DraftOptions


class PlainDraft(Draft):
    """No draft at all: the reference every speedup is measured against."""

    name = "plain"

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Nothing to propose."""
        return []


class PlainOptions(DraftOptions):
    """plain takes no options."""


def build(opts: PlainOptions, ctx: BuildContext) -> PlainDraft:
    return PlainDraft()


ENTRY = DraftEntry(
    "plain", PlainDraft, PlainOptions, build, drafts=False, summary="no draft: one verifier pass per token"
)
