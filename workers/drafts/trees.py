"""Token trees from a draft's candidates: best-first, so the tree branches where the draft is unsure.

A draft that knows several likely next tokens with their probabilities (an IGTree node's top classes and their
counts) gives `candidates(path) -> [(token, p), ...]` for the position after context + path. The tree grows
from the anchor by always adding the pending node whose path probability (the product of p along its path) is
highest, until `budget` nodes: where one class dominates, its path keeps the highest probability and the tree
follows the chain; where classes share the mass, siblings win and the tree branches (EAGLE-2's expansion over
a memory-based draft). Every prefix of the result is itself a tree of the highest path probabilities, so a
smaller budget is a truncation (used by `k = "auto"`).

Example:
    >>> tree, scores = best_first_tree(lambda path: [(7, 0.6), (8, 0.4)] if not path else [(9, 0.5)], 3)
    >>> tree.tokens, tree.parents, scores      # 7 (0.6), then its sibling 8 (0.4) beats 7 -> 9 (0.3)
    ((7, 8, 9), (-1, -1, 0), (0.6, 0.4, 0.3))
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from workers.decoding.tokentree import TokenTree

Candidates = Callable[[list[int]], list[tuple[int, float]]]


def best_first_tree(candidates: Candidates, budget: int) -> tuple[TokenTree, tuple[float, ...]]:
    """Up to `budget` nodes by descending path probability; (the tree, each node's path probability)."""
    tokens: list[int] = []
    parents: list[int] = []
    scores: list[float] = []
    paths: list[list[int]] = []
    heap: list[tuple[float, int, int, int]] = []  # (-path probability, tie order, parent, token)
    order = 0

    def push(parent: int, path: list[int], base: float) -> None:
        nonlocal order
        for token, p in candidates(path):
            if p > 0:
                heapq.heappush(heap, (-base * p, order, parent, int(token)))
                order += 1

    push(-1, [], 1.0)
    while heap and len(tokens) < budget:
        neg, _, parent, token = heapq.heappop(heap)
        path = (paths[parent] if parent >= 0 else []) + [token]
        tokens.append(token)
        parents.append(parent)
        scores.append(-neg)
        paths.append(path)
        if len(tokens) < budget:
            push(len(tokens) - 1, path, -neg)
    return TokenTree(tuple(tokens), tuple(parents)), tuple(scores)


def backoff(path: list[tuple[list[tuple[int, int]], int]]) -> list[tuple[int, float]]:
    """Candidates mixed along a matched path (root first), Witten-Bell style: each node's shares weigh
    total / (total + its classes) against what the shorter contexts above it give, so a deep node seen once
    keeps its label first but leaves its parents' alternatives room to branch."""
    mix: dict[int, float] = {}
    for top, total in path:
        if total <= 0:
            continue
        lam = total / (total + len(top))
        mix = {t: (1 - lam) * p for t, p in mix.items()}
        for t, c in top:
            mix[t] = mix.get(t, 0.0) + lam * c / total
    norm = sum(mix.values())
    return sorted(((t, p / norm) for t, p in mix.items()), key=lambda item: -item[1])


def merged(pairs: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Candidates with each token once (probabilities summed), most likely first."""
    out: dict[int, float] = {}
    for t, p in pairs:
        out[t] = out.get(t, 0.0) + p
    return sorted(out.items(), key=lambda item: -item[1])
