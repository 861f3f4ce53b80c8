"""The `hybrid` draft: a fixed olifant instance base plus an in-session n-gram that tracks the running text.

Policy, per drafted token (the paper's §5.3 proposal): look up the longest suffix of the running text (context
plus the guesses so far, at most n-1 tokens) that the session has seen before. If that match is at least
`min_match` tokens long, the session's continuation drafts the token (its most frequent follower, ties to
the most recent: the `ngram` draft's table); otherwise the instance base does (IGTree over the last `window`
tokens). The session thus takes over where the text repeats itself, including the verifier's own phrases,
and the instance base drafts everywhere else.

Confidence of each guess, for adaptive length (`adaptive = true`): a session guess scores match / (n-1), an
instance-base guess its `confidence` as in `olifant` (match depth / window by default; see
`workers.drafts.adaptive`).

Example:
    >>> draft = HybridDraft(ibase=tree, n=4, min_match=2)
    >>> draft.propose([5, 6, 7, 8, 5, 6], k=3)       # "5 6" was followed by 7, then "6 7" by 8: the session
    [7, 8, 5]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from workers.drafts.adaptive import AdaptiveLength
from workers.drafts.base import Draft
from workers.drafts.ngram import NgramTable
from workers.drafts.olifant import IBaseOptions, check_confidence, ibase_guess, load_ibase
from workers.drafts.registry import BuildContext, DraftEntry
from workers.errors import DraftError


def session_match(table: NgramTable, history: Sequence[int]) -> tuple[int | None, int]:
    """(the session's next token after the longest seen suffix of `history`, that suffix's length); (None, 0) if none."""
    for order in range(min(table.n - 1, len(history)), 0, -1):
        nexts = table.table.get(tuple(history[len(history) - order:]))
        if nexts:
            return int(max(nexts.items(), key=lambda item: item[1])[0]), order
    return None, 0


def choose(session: tuple[int | None, int], ibase: tuple[int, float], min_match: int, n: int) -> tuple[int, float, str]:
    """The policy for one token, from the session's (token, match length) and the instance base's scored guess:
    (token, confidence, source "session" | "ibase")."""
    token, match = session
    if token is not None and match >= min_match:
        return token, match / (n - 1), "session"
    guess, score = ibase
    return int(guess), score, "ibase"


class HybridDraft(Draft):
    """Session n-gram continuation when its match is long enough, the instance base's prediction otherwise."""

    name = "hybrid"

    def __init__(self, ibase, n: int = 4, min_match: int = 2, gate: AdaptiveLength | None = None,
                 confidence: str = "depth"):
        if not isinstance(n, int) or n < 2:
            raise DraftError(f"hybrid: n={n!r} is not accepted; give an integer >= 2")
        if not isinstance(min_match, int) or not 1 <= min_match <= n - 1:
            raise DraftError(f"hybrid: min_match={min_match!r} is not accepted; give an integer in 1..n-1 ({n - 1})")
        if ibase is None:
            raise DraftError("hybrid: needs ibase=<an IGTree or the path of a saved instance base>")
        self.ibase = load_ibase(ibase)
        self.window = int(self.ibase.window)
        self.n, self.min_match, self.gate = n, min_match, gate
        check_confidence("hybrid", self.ibase, confidence, gate)
        self.confidence = confidence
        self.sources: list[str] = []   # which component drafted each guess of the last proposal (for tests/logs)
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
        for t in context[len(seen):]:
            self._table.add(int(t))

    def scored(self, context: Sequence[int], k: int) -> list[tuple[int, float]]:
        """k chained guesses with their confidences, each fed back as context."""
        self._absorb(context)
        history = [int(t) for t in context[-max(self.n - 1, self.window):]]
        out, self.sources = [], []
        for _ in range(k):
            token, conf, source = choose(session_match(self._table, history),
                                         ibase_guess(self.ibase, history[-self.window:], self.confidence),
                                         self.min_match, self.n)
            out.append((token, conf))
            self.sources.append(source)
            history.append(token)
        return out

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
    `confidence`: how an instance-base guess is scored for adaptive length."""

    n: Annotated[int, Field(ge=2)] = 4
    min_match: Annotated[int, Field(ge=1)] = 2


def build(opts: HybridOptions, ctx: BuildContext) -> HybridDraft:
    return HybridDraft(ibase=ctx.artifacts["ibase"], n=opts.n, min_match=opts.min_match, gate=opts.gate(),
                       confidence=opts.confidence)


ENTRY = DraftEntry("hybrid", HybridDraft, HybridOptions, build, parts=("olifant", "ngram"),
                   summary="olifant instance base plus an in-session n-gram (session when its match is long)")
