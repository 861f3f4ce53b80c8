"""Test drafts that give token trees of set shapes around a known greedy continuation (right and wrong branches)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from workers.decoding.tokentree import TokenTree
from workers.interfaces import Draft

SHAPES = ("chain", "star", "binary", "deep_wide", "random")


class ShapedTreeDraft(Draft):
    """Knows the greedy text (prompt + reference) and drafts trees of one shape, with right and wrong nodes.

    A node is right when its path spells the greedy continuation; each level gets the right child with
    probability `hit` (seeded by the context length, so a generation is reproducible).
    """

    name = "shaped"

    def __init__(self, full: Sequence[int], shape: str, vocab: int, hit: float = 0.7):
        self.full, self.shape, self.vocab, self.hit = [int(t) for t in full], shape, vocab, hit

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        tree = self.propose_tree(context, k)
        return [tree.tokens[i] for i in tree.path(len(tree) - 1)] if len(tree) else []

    def _true(self, context: Sequence[int], depth: int) -> int | None:
        at = len(context) + depth
        return self.full[at] if at < len(self.full) else None

    def _wrong(self, rng: random.Random, avoid: int | None) -> int:
        t = rng.randrange(self.vocab)
        return t if t != avoid else (t + 1) % self.vocab

    def propose_tree(self, context: Sequence[int], budget: int) -> TokenTree:
        rng = random.Random(len(context) * 7919 + SHAPES.index(self.shape))
        width = {"chain": 1, "star": budget, "binary": 2, "deep_wide": 3, "random": rng.randint(1, 3)}[self.shape]
        tokens: list[int] = []
        parents: list[int] = []
        frontier = [(-1, 0, True)]  # (node, depth, on the greedy path)
        while frontier and len(tokens) < budget:
            parent, depth, right = frontier.pop(0)
            truth = self._true(context, depth) if right else None
            hit_at = rng.randrange(width) if truth is not None and rng.random() < self.hit else -1
            for j in range(width):
                if len(tokens) >= budget:
                    break
                token = truth if j == hit_at else self._wrong(rng, truth)
                tokens.append(token)
                parents.append(parent)
                frontier.append((len(tokens) - 1, depth + 1, j == hit_at))
            if self.shape == "deep_wide":  # deepen the right branch first: deep and wide at once
                frontier.sort(key=lambda f: not f[2])
        return TokenTree(tuple(tokens), tuple(parents))
