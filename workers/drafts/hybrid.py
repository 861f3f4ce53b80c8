"""The `hybrid` draft: a fixed olifant instance base plus an in-session n-gram that tracks the running text.

Policy, per drafted token (the paper's §5.3 proposal): look up the longest suffix of the running text (context
plus the guesses so far, at most n-1 tokens) that the session has seen before.
1. If that match is at least `min_match` tokens long, the session's continuation drafts the token (its most
   frequent follower, ties to the most recent: the `ngram` draft's table).
2. Otherwise the instance base does (IGTree over the last `window` tokens) if its guess scores at least
   `ibase_min` by `confidence` (0, the default, takes every guess).
3. Otherwise a shorter session match (down to one token) drafts it if there is one, and else drafting stops.
The session thus takes over where the text repeats itself, including the verifier's own phrases, and the
instance base drafts where it is sure enough; with `ibase_min` above 0 the hybrid drafts whatever the `ngram`
draft (same n) would, plus the instance base's confident guesses where the session has only a short match.

Confidence of each guess, for adaptive length (`adaptive = true`): a session guess scores match / (n-1), an
instance-base guess its `confidence` as in `olifant` (match depth / window by default; see
`workers.drafts.adaptive`).

Example:
    >>> draft = HybridDraft(ibase=tree, n=4, min_match=2)
    >>> draft.propose([5, 6, 7, 8, 5, 6], k=3)       # "5 6" was followed by 7, then "6 7" by 8: the session
    [7, 8, 5]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import Field

from workers.decoding.tokentree import TokenTree
from workers.drafts.adaptive import AdaptiveLength
from workers.drafts.ngram import NgramTable
from workers.drafts.olifant import IBaseOptions, check_confidence, check_tree, ibase_guess, load_ibase
from workers.drafts.registry import BuildContext, DraftEntry
from workers.drafts.trees import backoff, best_first_tree, merged
from workers.errors import DraftError
from workers.interfaces import Draft


def session_match(table: NgramTable, history: Sequence[int]) -> tuple[int | None, int]:
    """(the session's next token after the longest seen suffix of `history`, that suffix's length); (None, 0) if none."""
    for order in range(min(table.n - 1, len(history)), 0, -1):
        nexts = table.table.get(tuple(history[len(history) - order :]))
        if nexts:
            return int(max(nexts.items(), key=lambda item: item[1])[0]), order
    return None, 0


def choose(
    session: tuple[int | None, int],
    ibase: Callable[[], tuple[int, float]],
    min_match: int,
    n: int,
    ibase_min: float = 0.0,
) -> tuple[int, float, str] | None:
    """The policy for one token, from the session's (token, match length) and the instance base's scored guess
    (asked for only when the session does not decide): (token, confidence, source "session" | "ibase"), or None
    where drafting stops."""
    token, match = session
    if token is not None and match >= min_match:
        return token, match / (n - 1), "session"
    guess, score = ibase()
    if score >= ibase_min:
        return int(guess), score, "ibase"
    if token is not None:
        return token, match / (n - 1), "session"
    return None


class HybridDraft(Draft):
    """Session n-gram continuation when its match is long enough, the instance base's prediction otherwise."""

    name = "hybrid"

    def __init__(
        self,
        ibase,
        n: int = 4,
        min_match: int = 2,
        gate: AdaptiveLength | None = None,
        confidence: str = "depth",
        ibase_min: float = 0.0,
    ):
        if not isinstance(n, int) or n < 2:
            raise DraftError(f"hybrid: n={n!r} is not accepted; give an integer >= 2")
        if not isinstance(min_match, int) or not 1 <= min_match <= n - 1:
            raise DraftError(f"hybrid: min_match={min_match!r} is not accepted; give an integer in 1..n-1 ({n - 1})")
        if ibase is None:
            raise DraftError("hybrid: needs ibase=<an IGTree or the path of a saved instance base>")
        self.ibase = load_ibase(ibase)
        self.window = int(self.ibase.window)
        if not 0.0 <= ibase_min <= 1.0:
            raise DraftError(f"hybrid: ibase_min={ibase_min!r} is not accepted; give a confidence in 0..1")
        self.n, self.min_match, self.gate, self.ibase_min = n, min_match, gate, float(ibase_min)
        check_confidence("hybrid", self.ibase, confidence, gate is not None or ibase_min > 0)
        self.confidence = confidence
        self.sources: list[str] = []  # which component drafted each guess of the last proposal (for tests/logs)
        self.reset()

    def reset(self) -> None:
        """A new session: an empty table, fresh adaptive statistics."""
        self._table = NgramTable(self.n)
        if self.gate is not None:
            self.gate.reset()

    def _absorb(self, context: Sequence[int]) -> None:
        """Count the context's tokens not yet in the table (rebuilt if the context does not extend it)."""
        seen = self._table.units
        if len(context) < len(seen) or (seen and context[len(seen) - 1] != seen[-1]):
            self._table = NgramTable(self.n)
            seen = self._table.units
        for t in context[len(seen) :]:
            self._table.add(int(t))

    def scored(self, context: Sequence[int], k: int) -> list[tuple[int, float]]:
        """Up to k chained guesses with their confidences, each fed back as context (fewer where the policy stops)."""
        self._absorb(context)
        history = [int(t) for t in context[-max(self.n - 1, self.window) :]]
        out, self.sources = [], []
        for _ in range(k):
            tail = history[-self.window :]
            picked = choose(
                session_match(self._table, history),
                lambda tail=tail: ibase_guess(self.ibase, tail, self.confidence),
                self.min_match,
                self.n,
                self.ibase_min,
            )
            if picked is None:
                break
            token, conf, source = picked
            out.append((token, conf))
            self.sources.append(source)
            history.append(token)
        return out

    def propose_tree(self, context: Sequence[int], budget: int) -> TokenTree:
        """A tree of up to `budget` tokens: the session's continuation and the instance base's top classes."""
        return self.scored_tree(context, budget)[0]

    def scored_tree(self, context: Sequence[int], budget: int) -> tuple[TokenTree, tuple[float, ...]]:
        """The tree and each node's path probability. Per position, the session's token (when it has a match) gets
        its confidence match / (n-1), and the instance base's top classes share the rest by their node shares; a
        session match of `min_match` or more counts in full where the chain policy would take it alone."""
        check_tree("hybrid", self.ibase)
        self._absorb(context)
        history = [int(t) for t in context[-max(self.n - 1, self.window) :]]

        def candidates(path: list[int]) -> list[tuple[int, float]]:
            run = history + path
            token, match = session_match(self._table, run)
            p_session = match / (self.n - 1) if token is not None else 0.0
            if match >= self.min_match:
                p_session = max(p_session, 0.9)
            pairs = [(t, (1 - p_session) * p) for t, p in backoff(self.ibase.lookup_path(run[-self.window :]))]
            return merged(pairs + ([(token, p_session)] if token is not None else []))

        return best_first_tree(candidates, budget)

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k tokens by the policy; fewer under adaptive length."""
        if k <= 0:
            return []
        if self.gate is None:
            return [t for t, _ in self.scored(context, k)]
        self.gate.observe(context)
        return self.gate.cut(self.scored(context, k), context)


class HybridOptions(IBaseOptions):
    """`corpus`: the instance base's [[corpora]] entry; `n`: session order; `min_match`: session tokens needed;
    `ibase_min`: the score an instance-base guess needs (0: any); `confidence`: how it is scored (and, for
    adaptive length, every instance-base guess)."""

    n: Annotated[int, Field(ge=2)] = 4
    min_match: Annotated[int, Field(ge=1)] = 2
    ibase_min: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0

    def identity(self) -> dict[str, Any]:
        """As instance-base drafts', with `ibase_min` only when set and then `confidence` too (existing cells keep
        their keys)."""
        out = super().identity()
        if self.ibase_min > 0:
            out["confidence"] = self.confidence
        else:
            out.pop("ibase_min", None)
        return out


def build(opts: HybridOptions, ctx: BuildContext) -> HybridDraft:
    return HybridDraft(
        ibase=ctx.artifacts["ibase"],
        n=opts.n,
        min_match=opts.min_match,
        gate=opts.gate(),
        confidence=opts.confidence,
        ibase_min=opts.ibase_min,
    )


ENTRY = DraftEntry(
    "hybrid",
    HybridDraft,
    HybridOptions,
    build,
    parts=("olifant", "ngram"),
    summary="olifant instance base plus an in-session n-gram (session when its match is long)",
)
