"""The two shapes of a round's proposal: a `Chain` of drafted tokens (greedy or sampled) and a token `Tree`
(greedy only). A regime's round (`workers.decoding.regimes`) is the same for both; it asks its shape to

- `propose`: ask the draft for up to `budget` tokens, timed, cut where an id falls outside the vocabulary;
- `verify`: run one verifier pass over the proposal after a `Feed` (the anchor tokens fed before it, the tokens
  cached before those, which cache); row 0 follows the last anchor token, row 1 + i (no anchor: row i) node i;
- `accept`: the accepted path's node indices and the row of the position after it;
- `keep`: cut the cache back to the accepted path;
- `root` / `residual`: the cached regime's first-token fast path (the sub-proposal under the verifier's pending
  token, or None; the pending row once the first draft is rejected).

A chain is verified by causal passes (`logits`, `prefill`, `extend`) and judged by the round's judge
(`workers.decoding.judges`); a tree by one pass under an ancestors-only mask (`workers.decoding.tokentree`), the
greedy walk keeping the longest path the verifier agrees with. Either way the output is plain greedy decoding
token for token at temperature 0.

Example:
    >>> shape = Chain(GreedyJudge())
    >>> drafts = shape.propose(draft, context, 4, verifier, tally)     # Drafts(tokens, qs)
    >>> rows = shape.verify(verifier, tally, Feed(context, 0, "none"), drafts)   # (len(drafts) + 1, V)
    >>> path, row = shape.accept(rows, drafts, rooted=False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from workers.decoding.judges import GreedyJudge, Judge, QRows, Row
from workers.decoding.rounds import Tally, greedy_tokens, timed_draft, timed_pass
from workers.decoding.seam import VerifierLike
from workers.decoding.tokentree import TokenTree, attention_mask, position_ids, walk
from workers.interfaces import Draft


@dataclass(frozen=True)
class Feed:
    """Where a pass's tokens go: `anchor` tokens fed before the proposal (the uncached context, the pending token,
    the whole prompt at a fresh cache, or none), after `n_prefix` cached tokens, into `cache` ("none": uncached,
    "fresh": a new cache, "extend": the cached tokens')."""

    anchor: list[int]
    n_prefix: int
    cache: str

    def rows(self, n_proposed: int) -> int:
        """Rows a pass keeps: after the last anchor token (if any) and after each proposed token."""
        return n_proposed + bool(self.anchor)


@dataclass(frozen=True)
class Drafts:
    """A chain proposal: the drafted tokens and, per token, the distribution q it was sampled from (or None)."""

    tokens: list[int]
    qs: QRows

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Chain:
    """Chains of drafts, judged left to right by `judge` (greedy or speculative sampling)."""

    judge: Judge

    def skip(self, tally: Tally) -> None:
        """Count a round that drafts nothing."""
        tally.drafted_round(0)

    def propose(self, draft: Draft, context: Sequence[int], budget: int, verifier: VerifierLike, tally: Tally):
        """Up to `budget` drafted tokens (and their q rows when sampled), cut at the first id the verifier lacks."""
        if budget <= 0:
            self.skip(tally)
            return Drafts([], [])
        tokens, qs = timed_draft(verifier, tally, self.judge.propose, draft, context, budget, verifier.vocab_size)
        bad = next((i for i, t in enumerate(tokens) if not 0 <= t < verifier.vocab_size), None)
        if bad is not None:  # an id the verifier cannot embed has p = 0: cut the draft there
            tokens, qs = tokens[:bad], qs[:bad]
        tally.drafted_round(len(tokens))
        return Drafts(tokens, qs)

    def verify(self, verifier: VerifierLike, tally: Tally, feed: Feed, drafts: Drafts) -> torch.Tensor:
        """One causal pass over the feed's anchor + the drafts: (rows, V)."""
        run = {"none": verifier.logits, "fresh": verifier.prefill, "extend": verifier.extend}[feed.cache]
        return timed_pass(verifier, tally, run, feed.anchor + drafts.tokens, feed.rows(len(drafts)))

    def accept(self, rows: torch.Tensor, drafts: Drafts, rooted: bool) -> tuple[list[int], Row]:
        """(accepted draft indices, the row after them); `rooted`: drafts[0] passed already and row i follows it."""
        if rooted:
            n, row = self.judge.chain(rows, drafts.tokens[1:], drafts.qs[1:])
            return list(range(1 + n)), row
        n, row = self.judge.chain(rows, drafts.tokens, drafts.qs)
        return list(range(n)), row

    def tokens(self, drafts: Drafts, path: list[int]) -> list[int]:
        """The tokens of an accepted path."""
        return drafts.tokens[: len(path)]

    def keep(self, verifier: VerifierLike, n_prefix: int, path: list[int]) -> None:
        """Cut the cache back to its first n_prefix tokens + the accepted drafts."""
        verifier.crop(n_prefix + len(path))

    def root(self, pending: Row, drafts: Drafts) -> Drafts | None:
        """The drafts when their first token passes against the pending row, else None (a fast-path reject)."""
        return drafts if drafts.tokens and self.judge.check(pending, drafts.tokens[0], drafts.qs[0]) else None

    def residual(self, pending: Row, drafts: Drafts) -> Row:
        """The pending row once the first draft failed (sampled: what is left of the distribution)."""
        return self.judge.reject(pending, drafts.tokens[0], drafts.qs[0]) if drafts.tokens else pending


@dataclass
class Tree:
    """Token trees: every node verified in one pass under an ancestors-only mask; greedy only."""

    judge: GreedyJudge = field(default_factory=GreedyJudge)

    def skip(self, tally: Tally) -> None:
        """Count a round that drafts nothing (depth 0)."""
        tally.drafted_round(0, depth=0)

    def propose(self, draft: Draft, context: Sequence[int], budget: int, verifier: VerifierLike, tally: Tally):
        """The draft's tree of up to `budget` nodes (its chain when it cannot branch), without ids the verifier lacks."""
        if budget <= 0:
            self.skip(tally)
            return TokenTree((), ())
        tree = in_vocab(timed_draft(verifier, tally, draft_tree, draft, context, budget), verifier.vocab_size)
        tally.drafted_round(len(tree), depth=tree.depth)
        return tree

    def verify(self, verifier: VerifierLike, tally: Tally, feed: Feed, tree: TokenTree) -> torch.Tensor:
        """One masked pass over the feed's anchor + every node: (rows, V)."""
        mask = attention_mask(tree, feed.n_prefix, len(feed.anchor), verifier.dtype)
        pos = position_ids(tree, feed.n_prefix, len(feed.anchor))
        ids = feed.anchor + list(tree.tokens)
        return timed_pass(verifier, tally, verifier.masked, ids, pos, mask, feed.cache, feed.rows(len(tree)))

    def accept(self, rows: torch.Tensor, tree: TokenTree, rooted: bool) -> tuple[list[int], Row]:
        """The greedy walk: (accepted node indices, the row after the last); `rooted`: node 0 passed already."""
        targets = greedy_tokens(rows)
        if rooted:  # row i follows node i
            rest, _ = walk(tree, targets[0], targets, at=0)
            path = [0] + rest
            return path, rows[path[-1]]
        path, _ = walk(tree, targets[0], targets[1:])  # row 0 follows the anchor, row 1 + i node i
        return path, rows[1 + path[-1]] if path else rows[0]

    def tokens(self, tree: TokenTree, path: list[int]) -> list[int]:
        """The tokens of an accepted path."""
        return [tree.tokens[i] for i in path]

    def keep(self, verifier: VerifierLike, n_prefix: int, path: list[int]) -> None:
        """Keep the cache's first n_prefix tokens and the accepted path's rows only."""
        verifier.keep_rows(n_prefix, [n_prefix + i for i in path])

    def root(self, pending: Row, tree: TokenTree) -> TokenTree | None:
        """The subtree under the anchor's child carrying the verifier's pending token, or None."""
        token = self.judge.pick(pending)
        at = next((i for i, (t, p) in enumerate(zip(tree.tokens, tree.parents)) if p < 0 and t == token), None)
        return None if at is None else tree.subtree(at)[0]

    def residual(self, pending: Row, tree: TokenTree) -> Row:
        """Greedy: the pending row's argmax still stands."""
        return pending


Shape = Chain | Tree


def draft_tree(draft: Draft, context: Sequence[int], budget: int) -> TokenTree:
    """The draft's tree of up to `budget` tokens, or its chain when it cannot branch."""
    propose = getattr(draft, "propose_tree", None)
    tree = propose(context, budget) if propose is not None else TokenTree.chain(draft.propose(context, budget))
    return tree.truncated(budget)


def in_vocab(tree: TokenTree, vocab_size: int) -> TokenTree:
    """The tree without nodes the verifier cannot embed (and their descendants)."""
    if all(0 <= t < vocab_size for t in tree.tokens):
        return tree
    new: dict[int, int] = {-1: -1}
    tokens, parents = [], []
    for i, (t, p) in enumerate(zip(tree.tokens, tree.parents)):
        if 0 <= t < vocab_size and p in new:
            new[i] = len(tokens)
            tokens.append(t)
            parents.append(new[p])
    return TokenTree(tuple(tokens), tuple(parents))
