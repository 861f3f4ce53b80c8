"""The `plain` draft: proposes nothing, so the verifier decodes one token per forward pass."""

from __future__ import annotations

from workers.drafts.registry import BuildContext, DraftEntry, DraftOptions
from workers.interfaces import PlainDraft


class PlainOptions(DraftOptions):
    """plain takes no options."""


def build(opts: PlainOptions, ctx: BuildContext) -> PlainDraft:
    return PlainDraft()


ENTRY = DraftEntry(
    "plain", PlainDraft, PlainOptions, build, drafts=False, summary="no draft: one verifier pass per token"
)
