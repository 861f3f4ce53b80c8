"""Token-tree verification equals transformers' greedy `generate` for every tree shape, budget and regime."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.tiny_models import tiny_lm
from tests.workers.decoding.tree_drafts import SHAPES, ShapedTreeDraft
from workers.decoding import REGIMES, greedy_reference, speculative_generate
from workers.decoding.tokentree import TokenTree, attention_mask, position_ids, walk
from workers.drafts import make_draft
from workers.errors import DraftError
from workers.igtree import IGTree
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB, N_NEW = 500, 20


@pytest.fixture(scope="module", params=["llama", "mistral"])
def setup(request):
    verifier = Verifier(tiny_lm(request.param, 0, vocab=VOCAB, echo=0.3))
    prompt = list(range(3, 40))
    return verifier, prompt, greedy_reference(verifier, prompt, N_NEW)


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("budget", [1, 3, 8])
@pytest.mark.parametrize("shape", SHAPES)
def test_tree_output_equals_greedy(setup, shape, budget, regime):
    verifier, prompt, ref = setup
    draft = ShapedTreeDraft(prompt + ref, shape, VOCAB)
    res = speculative_generate(verifier, draft, prompt, N_NEW, budget, trees=True, **_flags(regime))
    assert list(res.tokens) == ref
    assert sum(res.tokens_per_step) == N_NEW and sum(res.drafted_per_step) == res.drafted
    assert all(a <= d for a, d in zip(res.accepted_per_step, res.depth_per_step))
    assert 0 <= res.path_acceptance <= 1


@pytest.mark.parametrize("regime", list(REGIMES))
def test_tree_depths_are_recorded(setup, regime):
    """Each round records its tree's depth: a binary tree of 8 nodes is shallower than a chain of 8."""
    verifier, prompt, ref = setup
    star = speculative_generate(
        verifier,
        ShapedTreeDraft(prompt + ref, "binary", VOCAB, hit=0.9),
        prompt,
        N_NEW,
        8,
        trees=True,
        **_flags(regime),
    )
    chain = speculative_generate(
        verifier, ShapedTreeDraft(prompt + ref, "chain", VOCAB, hit=0.9), prompt, N_NEW, 8, trees=True, **_flags(regime)
    )
    assert star.accepted > 0 and chain.accepted > 0
    assert max(star.depth_per_step) < max(chain.depth_per_step)  # a binary tree of 8 is shallower


@pytest.mark.parametrize("regime", list(REGIMES))
def test_a_chain_draft_as_a_tree_makes_the_chain_rounds(setup, regime):
    """A draft without `propose_tree` drafts its chain: the same passes and acceptances as the chain rounds."""
    verifier, prompt, ref = setup
    draft = make_draft("ngram", n=3)
    chain = speculative_generate(verifier, draft, prompt, N_NEW, 4, **_flags(regime))
    tree = speculative_generate(verifier, draft, prompt, N_NEW, 4, trees=True, **_flags(regime))
    assert tree.tokens == chain.tokens and list(tree.tokens) == ref
    assert (tree.steps, tree.accepted_per_step, tree.drafted) == (chain.steps, chain.accepted_per_step, chain.drafted)


def test_trees_are_greedy_only(setup):
    verifier, prompt, ref = setup
    with pytest.raises(ValueError, match="token trees are greedy only"):
        speculative_generate(verifier, make_draft("ngram"), prompt, 4, 3, False, temperature=0.7, trees=True)


def test_tree_structure():
    tree = TokenTree((5, 9, 6, 7, 8), (-1, -1, 0, 2, 0))
    assert tree.depths == (1, 1, 2, 3, 2) and tree.depth == 3
    assert tree.path(3) == [0, 2, 3]
    sub, old = tree.subtree(0)
    assert sub.tokens == (5, 6, 7, 8) and sub.parents == (-1, 0, 1, 0) and old == [0, 2, 3, 4]
    assert walk(tree, 5, [6, 0, 7, 3, 0]) == ([0, 2, 3], 3)
    assert walk(tree, 4, [0] * 5) == ([], 4)
    assert TokenTree.chain([1, 2, 3]).parents == (-1, 0, 1)
    with pytest.raises(ValueError, match="does not come before it"):
        TokenTree((1, 2), (1, -1))


def test_mask_sees_the_prefix_and_the_ancestors_only():
    tree = TokenTree((5, 9, 6), (-1, -1, 0))
    seen = attention_mask(tree, n_prefix=2, n_anchor=1, dtype=torch.float32)[0, 0] == 0  # (4, 6)
    assert seen.tolist() == [
        [True, True, True, False, False, False],  # the anchor: prefix + itself
        [True, True, True, True, False, False],  # node 0
        [True, True, True, False, True, False],  # node 1, a sibling: not node 0
        [True, True, True, True, False, True],  # node 2 under node 0
    ]
    assert position_ids(tree, first=2, n_anchor=1) == [2, 3, 3, 4]
    assert position_ids(tree, first=7, n_anchor=0) == [7, 7, 8]


def _flags(regime: str) -> dict:
    cached, fastpath = REGIMES[regime]
    return {"cached": cached, "fastpath": fastpath}


@pytest.fixture(scope="module")
def ibase_drafts(setup):
    """olifant and hybrid drafts over an instance base of the verifier's own continuations (often right)."""
    verifier, prompt, ref = setup
    other = list(range(60, 90))
    stream = np.array(prompt + ref + other + greedy_reference(verifier, other, N_NEW), dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(stream, 5)
    tree = IGTree.fit(windows[:, :4], windows[:, 4])
    return {"olifant": make_draft("olifant", ibase=tree), "hybrid": make_draft("hybrid", ibase=tree, n=4)}


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("name", ["olifant", "hybrid"])
def test_instance_base_trees_equal_greedy(setup, ibase_drafts, name, regime):
    verifier, prompt, ref = setup
    draft = ibase_drafts[name]
    assert 0 < len(draft.propose_tree(prompt, 6)) <= 6
    res = speculative_generate(verifier, draft, prompt, N_NEW, 6, trees=True, **_flags(regime))
    assert list(res.tokens) == ref and res.accepted > 0


def test_backoff_keeps_a_sure_label_first_and_gives_alternatives_room():
    from workers.drafts.trees import backoff

    mixed = dict(backoff([([(5, 60), (6, 40)], 100), ([(7, 1)], 1)]))  # a deep node seen once says 7
    assert max(mixed, key=mixed.get) == 7 and 0.5 < mixed[7] < 0.6
    assert mixed[5] / mixed[6] == pytest.approx(1.5) and sum(mixed.values()) == pytest.approx(1.0)


def test_timbl_backends_refuse_trees():
    class NoCounts:
        window = 4

        def predict(self, context):
            return 1

        def lookup(self, context):
            return 1, None

    with pytest.raises(DraftError, match="token trees need each node's top classes"):
        make_draft("olifant", ibase=NoCounts()).propose_tree([1, 2], 3)
