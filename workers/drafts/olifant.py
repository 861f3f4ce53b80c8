"""The `olifant` draft: an IGTree instance base queried with the last `window` tokens, chained k times.

Example:
    >>> draft = OlifantDraft(ibase="runs/ibases/wikitext-w4.igtree")
    >>> draft.propose(context_ids, k=3)          # three lookups, each fed the previous guess
    [1014, 272, 907]

With `gate=AdaptiveLength(...)` (spec: `adaptive = true`, `threshold`, `online`) each guess is scored and
drafting stops at the first guess below the threshold (`workers.decoding.adaptive`). `confidence` picks the score:
"depth" (default), the match depth over the window (1.0 when all `window` positions matched, 0.0 for the
root's label); "share", the majority share of the matched node (the fraction of its training instances whose
next token is the guess); "depth_share", their product. The node is the deepest *stored* one: pruning removed
children that agreed with their parent, so a pruned match reports the node where the prediction was decided.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from workers.decoding.tokentree import TokenTree
from workers.drafts.adaptive import AdaptiveLength, AdaptiveOptions
from workers.drafts.registry import BuildContext, DraftEntry, Requirement
from workers.drafts.trees import backoff, best_first_tree
from workers.errors import DraftError
from workers.interfaces import Draft


def load_ibase(ibase):
    """An IGTree-like object as is, or an instance base loaded from a path with `IGTree.load`."""
    if isinstance(ibase, (str, os.PathLike)):
        from workers.igtree import IGTree, TimblIGTree

        # the trainer names TiMBL instance bases *.ibase and native ones *.igtree
        return TimblIGTree.load(ibase) if str(ibase).endswith(".ibase") else IGTree.load(ibase)
    if not (hasattr(ibase, "predict") and hasattr(ibase, "window")):
        raise DraftError(
            f"olifant: ibase={type(ibase).__name__} is not accepted; give an IGTree, a TimblIGTree or a path"
        )
    return ibase


CONFIDENCES = ("depth", "share", "depth_share")


def check_confidence(draft: str, ibase, confidence: str, scored: bool) -> None:
    """Refuse an unknown confidence, or, when scores are used, a backend that cannot give them (TiMBL's has no
    match depths and no node shares)."""
    if confidence not in CONFIDENCES:
        raise DraftError(f"{draft}: confidence={confidence!r} is not accepted; use one of {', '.join(CONFIDENCES)}")
    if scored and ibase.lookup([0] * int(ibase.window))[1] is None:
        raise DraftError(f"{draft}: scoring guesses needs match depths; the TiMBL backend gives none (use native)")
    if scored and confidence != "depth" and not hasattr(ibase, "lookup_scored"):
        raise DraftError(f"{draft}: confidence={confidence!r} needs node shares; only the native backend has them")


def check_tree(draft: str, ibase) -> None:
    """Refuse token trees over a backend without per-node class counts (TiMBL's)."""
    if not hasattr(ibase, "lookup_path"):
        raise DraftError(f"{draft}: token trees need each node's top classes; the TiMBL backend has none (use native)")


def ibase_guess(ibase, tail: Sequence[int], confidence: str = "depth") -> tuple[int, float]:
    """The instance base's guess after `tail` and its score: depth / window, majority share, or their product."""
    if confidence == "depth":
        token, depth = ibase.lookup(tail)
        return int(token), (depth or 0) / ibase.window
    token, depth, share = ibase.lookup_scored(tail)
    return int(token), share if confidence == "share" else share * depth / ibase.window


class OlifantDraft(Draft):
    """Memory-based draft: k chained IGTree predictions from the last `window` tokens."""

    name = "olifant"

    def __init__(self, ibase, gate: AdaptiveLength | None = None, confidence: str = "depth"):
        if ibase is None:
            raise DraftError("olifant: needs ibase=<an IGTree or the path of a saved instance base>")
        self.ibase = load_ibase(ibase)
        self.window = int(self.ibase.window)
        self.gate = gate
        self.confidence = confidence
        check_confidence("olifant", self.ibase, confidence, gate is not None)

    def reset(self) -> None:
        if self.gate is not None:
            self.gate.reset()

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k tokens, each predicted from the window ending at the previous guess."""
        if self.gate is not None:
            self.gate.observe(context)
            return self.gate.cut(self.scored(context, k), context)
        w = self.window
        tail = [int(t) for t in context[-w:]]  # shorter at a document start: the ibase left-pads it
        out: list[int] = []
        for _ in range(k):
            token = int(self.ibase.predict(tail))
            out.append(token)
            tail = (tail + [token])[-w:]
        return out

    def propose_tree(self, context: Sequence[int], budget: int) -> TokenTree:
        """A tree of up to `budget` tokens over the matched nodes' top classes (`workers.drafts.trees`)."""
        return self.scored_tree(context, budget)[0]

    def scored_tree(self, context: Sequence[int], budget: int) -> tuple[TokenTree, tuple[float, ...]]:
        """The tree and each node's path probability (the product along it of the matched nodes' class shares,
        backed off to the shorter contexts' where a node saw few instances: `workers.drafts.trees.backoff`)."""
        check_tree("olifant", self.ibase)
        tail = [int(t) for t in context[-self.window :]]

        def candidates(path: list[int]) -> list[tuple[int, float]]:
            return backoff(self.ibase.lookup_path((tail + path)[-self.window :]))

        return best_first_tree(candidates, budget)

    def scored(self, context: Sequence[int], k: int) -> list[tuple[int, float]]:
        """k chained guesses with their confidence (`confidence`: depth / window, majority share, or both)."""
        w = self.window
        tail = [int(t) for t in context[-w:]]
        out: list[tuple[int, float]] = []
        for _ in range(k):
            token, score = ibase_guess(self.ibase, tail, self.confidence)
            out.append((token, score))
            tail = (tail + [token])[-w:]
        return out


class IBaseOptions(AdaptiveOptions):
    """Options of a draft backed by an instance base: `corpus` (its [[corpora]] entry), adaptive length and the
    `confidence` that scores its guesses."""

    corpus_fields = ("corpus",)
    corpus: str
    confidence: Literal["depth", "share", "depth_share"] = "depth"
    tree: Annotated[int, Field(gt=0, le=64)] | None = None  # token trees of up to this many draft tokens per pass
    auto: bool = False  # set by the strategy's k = "auto": each round's length from the pass-cost curve
    optimise: Literal["speed", "energy"] | None = None  # what k = "auto" maximises (default: speed)

    @model_validator(mode="after")
    def _tree_and_auto(self):
        if self.tree is not None and self.adaptive:
            raise ValueError(
                "tree = N spends a budget by the draft's top classes; it cannot be combined with "
                "adaptive = true (drop one)"
            )
        if self.auto and self.adaptive:
            raise ValueError('k = "auto" chooses each round\'s length itself; drop adaptive = true')
        if self.optimise is not None and not self.auto:
            raise ValueError('optimise applies to k = "auto" only; set k = "auto" or drop optimise')
        return self

    def identity(self) -> dict[str, Any]:
        """As adaptive drafts', with `confidence` only when it is not the default, and the tree and auto keys only
        when set (existing cells keep their keys)."""
        out = super().identity()
        if not self.adaptive or self.confidence == "depth":
            out.pop("confidence", None)
        if self.tree is None:
            out.pop("tree", None)
        if not self.auto:
            out.pop("auto", None)
        out.pop("optimise", None)
        if self.auto:
            out["optimise"] = self.optimise or "speed"
        return out

    def requires(self) -> dict[str, Requirement]:
        return {"ibase": Requirement("ibase", self.corpus)}


class OlifantOptions(IBaseOptions):
    """`corpus`: the [[corpora]] entry whose instance base drafts; `adaptive`/`threshold`/`online`/`confidence`:
    draft length."""


def build(opts: OlifantOptions, ctx: BuildContext) -> OlifantDraft:
    return OlifantDraft(ibase=ctx.artifacts["ibase"], gate=opts.gate(), confidence=opts.confidence)


ENTRY = DraftEntry("olifant", OlifantDraft, OlifantOptions, build, summary="IGTree instance base trained on a corpus")
