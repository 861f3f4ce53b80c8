"""The `olifant` draft: an IGTree instance base queried with the last `window` tokens, chained k times.

Example:
    >>> draft = OlifantDraft(ibase="runs/ibases/wikitext-w4.igtree")
    >>> draft.propose(context_ids, k=3)          # three lookups, each fed the previous guess
    [1014, 272, 907]
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from workers.drafts.base import Draft
from workers.drafts.registry import BuildContext, DraftEntry, DraftOptions, Requirement
from workers.errors import DraftError

def load_ibase(ibase):
    """An IGTree-like object as is, or an instance base loaded from a path with `IGTree.load`."""
    if isinstance(ibase, (str, os.PathLike)):
        from workers.igtree import IGTree, TimblIGTree

        # the trainer names TiMBL instance bases *.ibase and native ones *.igtree
        return TimblIGTree.load(ibase) if str(ibase).endswith(".ibase") else IGTree.load(ibase)
    if not (hasattr(ibase, "predict") and hasattr(ibase, "window")):
        raise DraftError(f"olifant: ibase={type(ibase).__name__} is not accepted; give an IGTree, a TimblIGTree or a path")
    return ibase


class OlifantDraft(Draft):
    """Memory-based draft: k chained IGTree predictions from the last `window` tokens."""

    name = "olifant"

    def __init__(self, ibase):
        if ibase is None:
            raise DraftError("olifant: needs ibase=<an IGTree or the path of a saved instance base>")
        self.ibase = load_ibase(ibase)
        self.window = int(self.ibase.window)

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k tokens, each predicted from the window ending at the previous guess."""
        w = self.window
        tail = [int(t) for t in context[-w:]]  # shorter at a document start: the ibase left-pads it
        out: list[int] = []
        for _ in range(k):
            token = int(self.ibase.predict(tail))
            out.append(token)
            tail = (tail + [token])[-w:]
        return out


class OlifantOptions(DraftOptions):
    """`corpus`: the [[corpora]] entry whose instance base drafts (trained with the verifier's tokenizer)."""

    corpus_fields = ("corpus",)
    corpus: str

    def requires(self) -> dict[str, Requirement]:
        return {"ibase": Requirement("ibase", self.corpus)}


def build(opts: OlifantOptions, ctx: BuildContext) -> OlifantDraft:
    return OlifantDraft(ibase=ctx.artifacts["ibase"])


ENTRY = DraftEntry("olifant", OlifantDraft, OlifantOptions, build, summary="IGTree instance base trained on a corpus")
