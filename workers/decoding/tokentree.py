"""Token trees: several drafted continuations verified in one forward pass (SpecInfer, Medusa, EAGLE-2).

A tree is a list of nodes in topological order (each node's parent before it); `parents[i]` is the index of
node i's parent, -1 for a child of the *anchor* (the token the verifier's next prediction follows: the last
context token, or the pending token). Node i sits at depth 1 + its parent's depth and its position id is the
anchor's plus that depth. One pass feeds the anchor (where not cached yet) and every node under a 4-D attention
mask in which a node sees the prefix and its own ancestors only; the logits after node i are then exactly
those after the sequence prefix + path(i), so the greedy walk (from the anchor, follow the child whose token is
the verifier's argmax) accepts the longest path that greedy decoding would have produced, and its output is
plain greedy decoding token for token. A chain is the tree whose parents are -1, 0, 1, ...

Example:
    >>> tree = TokenTree((5, 9, 6, 7), (-1, -1, 0, 2))   # 5 -> 6 -> 7 and 9: two branches under the anchor
    >>> tree.depths
    (1, 1, 2, 3)
    >>> walk(tree, anchor_target=5, targets=[6, 0, 7, 3])  # (accepted nodes, the verifier's token after them)
    ([0, 2, 3], 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TokenTree:
    """Drafted tokens as a tree: `tokens[i]` with parent `parents[i]` (-1: under the anchor), parents first."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]

    def __post_init__(self):
        if len(self.tokens) != len(self.parents):
            raise ValueError(f"token tree: {len(self.tokens)} tokens but {len(self.parents)} parents")
        bad = next((i for i, p in enumerate(self.parents) if not -1 <= p < i), None)
        if bad is not None:
            raise ValueError(f"token tree: node {bad}'s parent {self.parents[bad]} does not come before it")

    @classmethod
    def chain(cls, tokens: Sequence[int]) -> TokenTree:
        """The one-branch tree of a chain of drafts."""
        return cls(tuple(int(t) for t in tokens), tuple(range(-1, len(tokens) - 1)))

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def depths(self) -> tuple[int, ...]:
        """Depth of every node (1 for the anchor's children)."""
        out: list[int] = []
        for p in self.parents:
            out.append(1 if p < 0 else out[p] + 1)
        return tuple(out)

    @property
    def depth(self) -> int:
        """The longest path's length (0 for an empty tree)."""
        return max(self.depths, default=0)

    def path(self, node: int) -> list[int]:
        """Node indices from the anchor's child down to `node`."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]

    def subtree(self, root: int) -> tuple[TokenTree, list[int]]:
        """The subtree under (and including) `root`, re-indexed with root first; and the old index of each node."""
        keep, inside = [root], {root}
        for i in range(root + 1, len(self.tokens)):
            if self.parents[i] in inside:
                keep.append(i)
                inside.add(i)
        new = {old: j for j, old in enumerate(keep)}
        parents = tuple(new.get(self.parents[old], -1) if old != root else -1 for old in keep)
        return TokenTree(tuple(self.tokens[i] for i in keep), parents), keep

    def truncated(self, n: int) -> TokenTree:
        """The first n nodes (a valid tree: parents come first)."""
        return TokenTree(self.tokens[:n], self.parents[:n])


def walk(tree: TokenTree, anchor_target: int, targets: Sequence[int], at: int = -1) -> tuple[list[int], int]:
    """Greedy acceptance: (accepted node indices, root first; the verifier's token after the last of them).

    `anchor_target` is the verifier's argmax after the anchor (or after node `at`, where the walk starts below an
    accepted node), `targets[i]` its argmax after node i.
    """
    path: list[int] = []
    target = int(anchor_target)
    while True:
        child = next((i for i in range(at + 1, len(tree)) if tree.parents[i] == at and tree.tokens[i] == target), None)
        if child is None:
            return path, target
        path.append(child)
        target, at = int(targets[child]), child


def ancestor_mask(tree: TokenTree) -> torch.Tensor:
    """(N, N) bool: node i may see node j (j is i or one of its ancestors)."""
    import torch  # deferred: the draft registry imports this module, and `validate` needs no torch (2-3 s)

    n = len(tree)
    seen = torch.zeros(n, n, dtype=torch.bool)
    for i, p in enumerate(tree.parents):
        if p >= 0:
            seen[i] = seen[p]
        seen[i, i] = True
    return seen


def attention_mask(
    tree: TokenTree, n_prefix: int, n_anchor: int, dtype: torch.dtype, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Additive 4-D mask (1, 1, n_anchor + N, n_prefix + n_anchor + N): 0 where a query may look, -inf-like elsewhere.

    The queries are `n_anchor` causal tokens (the uncached context, or the pending token; 0 when the anchor is
    cached already) then the tree's nodes; every query sees the `n_prefix` cached tokens, a node also the anchor
    tokens and its ancestors.
    """
    import torch  # deferred: see ancestor_mask

    n = len(tree)
    q, kv = n_anchor + n, n_prefix + n_anchor + n
    seen = torch.zeros(q, kv, dtype=torch.bool)
    seen[:, :n_prefix] = True
    seen[:n_anchor, n_prefix : n_prefix + n_anchor] = torch.ones(n_anchor, n_anchor, dtype=torch.bool).tril()
    seen[n_anchor:, n_prefix : n_prefix + n_anchor] = True
    seen[n_anchor:, n_prefix + n_anchor :] = ancestor_mask(tree)
    mask = torch.zeros(q, kv, dtype=dtype)
    mask.masked_fill_(~seen, torch.finfo(dtype).min)
    return mask[None, None].to(device)


def position_ids(tree: TokenTree, first: int, n_anchor: int) -> list[int]:
    """Position ids of the fed tokens: the anchor tokens first.. then each node at the last anchor's + its depth."""
    last = first + n_anchor - 1
    return list(range(first, first + n_anchor)) + [last + d for d in tree.depths]
