"""One `Round` per regime; a round's proposal is a chain or a token tree (its `Shape`, `workers.decoding.shapes`).

- `UncachedRound`: one full forward over context + proposal; the accepted path + the verifier's next token (the
  bonus, or the replacement of the first rejected draft): n + 1 new tokens per pass.
- `CachedRound`, the paper's: prefill once and keep the KV cache. The previous pass already gives the next
  position's row (`pending`), so the first drafted token is judged against it for free (the *rejection
  fast-path*): on a rejection the verifier's token is taken and only that token is fed; on a pass the proposal
  under it is fed in one pass, the cache is cut back to the accepted path, and the row after it (after a sampled
  rejection: the residual) is carried into the next round. n >= 1 new tokens per pass, 1 per fast-path reject.
- `StandardRound` (transformers, vLLM): the last new token is pending (not yet fed); each round feeds it plus the
  proposal in one pass (the first round: the whole prompt plus the proposal) and keeps the accepted path plus the
  next token: up to k+1 new tokens per pass.

`ROUNDS` picks the class by regime name; `run_rounds` drives any of them until EOS or max_new_tokens.

Example:
    >>> tally = Tally(k=4)
    >>> rnd = CachedRound(verifier, draft, Chain(GreedyJudge()), tally, k=4, eos_id=None)
    >>> run_rounds(rnd, prompt, max_new_tokens=32, eos_id=None, tally=tally)
    >>> len(tally.tokens)
    32
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from workers.decoding.judges import Judge, Row
from workers.decoding.rounds import Tally, timed_pass
from workers.decoding.seam import VerifierLike
from workers.decoding.shapes import Feed, Shape
from workers.interfaces import Draft


class Round(Protocol):
    """One regime's speculative round: `start` once before the first (the prompt), then `step` per round."""

    def start(self, prompt: list[int]) -> None:
        """Prepare for the first round after `prompt` (the paper's cached regime prefills here)."""

    def step(self, context: list[int], room: int) -> tuple[list[int], int]:
        """One round after `context` with `room` tokens left: (new tokens, how many of them came from the draft)."""
        ...


@dataclass
class RoundParts:
    """What every round works with: the verifier, the draft, the proposal's shape, the tally, k and the EOS id."""

    verifier: VerifierLike
    draft: Draft
    shape: Shape
    tally: Tally
    k: int
    eos_id: int | None

    @property
    def judge(self) -> Judge:
        """The shape's judge (greedy for token trees)."""
        return self.shape.judge

    def start(self, prompt: list[int]) -> None:
        """Nothing to prepare (the cached regime overrides it)."""

    def propose(self, context: list[int], budget: int):
        """The draft's proposal of up to `budget` tokens, timed and counted."""
        return self.shape.propose(self.draft, context, budget, self.verifier, self.tally)

    def verify(self, feed: Feed, proposal) -> tuple[list[int], Row]:
        """One pass over the feed + the proposal: (accepted path, row after it). With no anchor fed (the paper's
        cached round) the proposal's first token passed already against the pending row, and the walk starts below it."""
        rows = self.shape.verify(self.verifier, self.tally, feed, proposal)
        return self.shape.accept(rows, proposal, rooted=not feed.anchor)


@dataclass
class UncachedRound(RoundParts):
    """A full forward over context + proposal per round (drafts capped so the bonus token still fits)."""

    def step(self, context: list[int], room: int) -> tuple[list[int], int]:
        """The accepted path + the verifier's next token."""
        proposal = self.propose(context, min(self.k, room - 1))
        path, row = self.verify(Feed(context, 0, "none"), proposal)
        return self.shape.tokens(proposal, path) + [self.judge.pick(row)], len(path)


@dataclass
class StandardRound(RoundParts):
    """The standard cached scheme: the pending token (the whole prompt at first) + the proposal, in one pass."""

    first: bool = True

    def step(self, context: list[int], room: int) -> tuple[list[int], int]:
        """The accepted path + the verifier's next token; the cache keeps the pending token and the path."""
        proposal = self.propose(context, min(self.k, room - 1))
        # the cache holds context[:-1]: the last token is the pending one
        feed = Feed(context, 0, "fresh") if self.first else Feed(context[-1:], len(context) - 1, "extend")
        self.first = False
        path, row = self.verify(feed, proposal)
        self.shape.keep(self.verifier, len(context), path)
        return self.shape.tokens(proposal, path) + [self.judge.pick(row)], len(path)


@dataclass
class CachedRound(RoundParts):
    """The paper's cached scheme with its first-token fast path; `pending` is the row after the cached tokens."""

    pending: Row | None = None

    def start(self, prompt: list[int]) -> None:
        """Prefill the prompt; its last position's row is the first pending one."""
        logits = timed_pass(self.verifier, self.tally, self.verifier.prefill, prompt, 1)  # (1, V)
        self.pending = self.judge.dist(logits[-1])

    def step(self, context: list[int], room: int) -> tuple[list[int], int]:
        """(new tokens, n accepted); the cache holds all of `context`. Ends with pending None when the generation
        ends here (its last token, or the verifier's EOS)."""
        pending, judge = self.pending, self.judge
        known = judge.known(pending)
        if room <= 1 or (known is not None and known == self.eos_id):
            self.shape.skip(self.tally)  # the verifier's own token ends the generation: no draft, no pass
            self.pending = None
            return [judge.pick(pending)], 0
        proposal = self.propose(context, min(self.k, room))
        rooted = self.shape.root(pending, proposal)
        if rooted is not None:  # the first token passed: feed the proposal under it
            path, self.pending = self.verify(Feed([], len(context), "extend"), rooted)
            self.shape.keep(self.verifier, len(context), path)
            return self.shape.tokens(rooted, path), len(path)
        self.tally.fastpath_rejects += bool(len(proposal))
        token = judge.pick(self.shape.residual(pending, proposal))
        self.pending = None
        if token != self.eos_id:
            logits = timed_pass(self.verifier, self.tally, self.verifier.extend, [token])  # (1, V)
            self.pending = judge.dist(logits[-1])
        return [token], 0


ROUNDS: dict[str, type[RoundParts]] = {
    "uncached": UncachedRound,
    "cached": CachedRound,
    "cached-standard": StandardRound,
}


def run_rounds(rnd: Round, prompt: list[int], max_new_tokens: int, eos_id: int | None, tally: Tally) -> None:
    """Rounds after `prompt` until EOS or max_new_tokens new tokens (none at all for 0)."""
    if max_new_tokens == 0:
        return
    rnd.start(prompt)
    while not tally.done(max_new_tokens):
        new, n = rnd.step(prompt + tally.tokens, max_new_tokens - len(tally.tokens))
        tally.record(new, n, eos_id, max_new_tokens)
