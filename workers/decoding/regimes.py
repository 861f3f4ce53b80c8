"""Greedy speculative rounds over token trees, in the three regimes (`workers.decoding`'s rounds, one tree per pass).

A round asks the draft for a tree of up to `budget` tokens (`propose_tree(context, budget) -> TokenTree`; a draft
without it gives its chain) and verifies every node in one pass under an ancestors-only mask
(`workers.tokentree`). The greedy walk keeps the longest path the verifier agrees with:
- uncached: context + nodes in one pass; path + the verifier's next token;
- cached, the paper's: the previous pass gave the next position's argmax; the anchor child carrying it (if any)
  is accepted for free and only its subtree is fed; the cache keeps the accepted path's rows only;
- cached, standard: the pending token + nodes; the cache keeps the pending token and the accepted path's rows.
Trees are greedy only (temperature 0).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from workers.decoding import Tally, greedy_tokens, timed_pass
from workers.drafts.base import Draft
from workers.tokentree import TokenTree, attention_mask, position_ids, walk
from workers.verifier import Verifier


def draft_tree(draft: Draft, context: Sequence[int], budget: int) -> TokenTree:
    """The draft's tree of up to `budget` tokens, or its chain when it cannot branch."""
    if budget <= 0:
        return TokenTree((), ())
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


def propose_tree(draft: Draft, context: Sequence[int], budget: int, verifier: Verifier, tally: Tally) -> TokenTree:
    """Ask the draft for a tree, timed into tally.draft_s; counts its nodes as drafted."""
    verifier.sync()
    t0 = time.perf_counter()
    tree = in_vocab(draft_tree(draft, context, budget), verifier.vocab_size)
    verifier.sync()
    tally.draft_s += time.perf_counter() - t0
    tally.drafted += len(tree)
    tally.drafted_per_step.append(len(tree))
    tally.depth_per_step.append(tree.depth)
    return tree


def tree_pass(
    verifier: Verifier, tally: Tally, anchor: list[int], tree: TokenTree, n_prefix: int, cache: str
) -> list[int]:
    """One pass over `anchor` tokens + the tree's nodes after `n_prefix` cached ones; the argmax after the last
    anchor token and after each node (1 + N)."""
    mask = attention_mask(tree, n_prefix, len(anchor), verifier.dtype)
    pos = position_ids(tree, n_prefix, len(anchor))
    n_out = len(tree) + (1 if anchor else 0)
    logits = timed_pass(verifier, tally, verifier.masked, anchor + list(tree.tokens), pos, mask, cache, n_out)
    return greedy_tokens(logits)


def uncached_tree_round(
    verifier: Verifier, draft: Draft, context: list[int], budget: int, tally: Tally
) -> tuple[list[int], int]:
    """One full forward over context + tree: (the accepted path + the verifier's next token, path length)."""
    tree = propose_tree(draft, context, budget, verifier, tally)
    targets = tree_pass(verifier, tally, context, tree, 0, "none")
    path, bonus = walk(tree, targets[0], targets[1:])
    return [tree.tokens[i] for i in path] + [bonus], len(path)


def standard_tree_round(
    verifier: Verifier, draft: Draft, context: list[int], budget: int, tally: Tally, first: bool
) -> tuple[list[int], int]:
    """Feed the pending token (the whole prompt at first) + the tree; the cache keeps the accepted path."""
    tree = propose_tree(draft, context, budget, verifier, tally)
    anchor, n_prefix = (context, 0) if first else (context[-1:], len(context) - 1)
    targets = tree_pass(verifier, tally, anchor, tree, n_prefix, "fresh" if first else "extend")
    path, bonus = walk(tree, targets[0], targets[1:])
    verifier.keep_rows(len(context), [len(context) + i for i in path])
    return [tree.tokens[i] for i in path] + [bonus], len(path)


def cached_tree_round(
    verifier: Verifier,
    draft: Draft,
    context: list[int],
    pending: int,
    room: int,
    budget: int,
    tally: Tally,
    eos_id: int | None,
) -> tuple[list[int], int, int | None]:
    """The paper's cached round over a tree: (new tokens, n accepted, argmax of the next position or None at the end).

    The cache holds all of `context`; `pending` is the verifier's token after it (from the previous pass).
    """
    if room <= 1 or pending == eos_id:
        tally.drafted_per_step.append(0)
        tally.depth_per_step.append(0)
        return [pending], 0, None
    tree = propose_tree(draft, context, min(budget, room), verifier, tally)
    root = next((i for i, (t, p) in enumerate(zip(tree.tokens, tree.parents)) if p < 0 and t == pending), None)
    if root is None:  # the fast path: no branch starts with the verifier's token, one 1-token pass
        tally.fastpath_rejects += bool(len(tree))
        logits = timed_pass(verifier, tally, verifier.extend, [pending])
        return [pending], 0, int(logits[-1].argmax())
    sub, _ = tree.subtree(root)
    targets = tree_pass(verifier, tally, [], sub, len(context), "extend")
    rest, after = walk(sub, targets[0], targets, at=0)
    path = [0] + rest
    verifier.keep_rows(len(context), [len(context) + i for i in path])
    return [sub.tokens[i] for i in path], len(path), after


def generate_uncached_tree(
    verifier: Verifier, draft: Draft, prompt: list[int], max_new: int, budget: int, eos_id: int | None, tally: Tally
) -> None:
    """Tree rounds of full forwards until EOS or max_new tokens (budget capped so the bonus token still fits)."""
    while not tally.done(max_new):
        room = max_new - len(tally.tokens)
        new, n = uncached_tree_round(verifier, draft, prompt + tally.tokens, min(budget, room - 1), tally)
        tally.record(new, n, eos_id, max_new)


def generate_standard_tree(
    verifier: Verifier, draft: Draft, prompt: list[int], max_new: int, budget: int, eos_id: int | None, tally: Tally
) -> None:
    """Standard cached tree rounds until EOS or max_new tokens."""
    while not tally.done(max_new):
        room = max_new - len(tally.tokens)
        first = not tally.tokens_per_step
        new, n = standard_tree_round(verifier, draft, prompt + tally.tokens, min(budget, room - 1), tally, first)
        tally.record(new, n, eos_id, max_new)


def generate_cached_tree(
    verifier: Verifier, draft: Draft, prompt: list[int], max_new: int, budget: int, eos_id: int | None, tally: Tally
) -> None:
    """Prefill once, then the paper's cached rounds over trees until EOS or max_new tokens."""
    if max_new == 0:
        return
    pending = int(timed_pass(verifier, tally, verifier.prefill, prompt, 1)[-1].argmax())
    while not tally.done(max_new):
        room = max_new - len(tally.tokens)
        new, n, pending = cached_tree_round(
            verifier, draft, prompt + tally.tokens, pending, room, budget, tally, eos_id
        )
        tally.record(new, n, eos_id, max_new)
        if pending is None:
            break
