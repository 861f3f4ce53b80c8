"""Adaptive draft length: the stop rule, the online estimate read off the context, and the olifant gate."""

from __future__ import annotations

import numpy as np
import pytest

from workers.decoding.adaptive import (
    PRIOR_WEIGHT,
    AdaptiveLength,
    accepted_count,
    level,
    stop_rule,
)
from workers.drafts import build_draft, lookup, make_draft
from workers.errors import DraftError
from workers.igtree import IGTree


@pytest.fixture(scope="module")
def tree():
    """A pattern the tree knows at full depth, then noise it knows only shallowly."""
    rng = np.random.default_rng(1)
    stream = np.concatenate([np.tile([10, 11, 12, 13, 14, 15], 20), rng.integers(20, 40, size=300)])
    windows = np.lib.stride_tricks.sliding_window_view(stream, 5)
    return IGTree.fit(windows[:, :4], windows[:, 4])


def test_stop_rule_stops_at_the_first_token_below_threshold():
    scored = [(1, 0.9), (2, 0.5), (3, 0.49), (4, 1.0)]
    assert stop_rule(scored, 0.5) == [1, 2]  # equal to the threshold is kept; 4 is never reached
    assert stop_rule(scored, 0.0) == [1, 2, 3, 4]
    assert stop_rule(scored, 0.95) == []  # an empty proposal: a plain pass in the cached regime
    assert stop_rule([], 0.5) == []


def test_accepted_count_is_the_common_prefix_with_the_new_tokens():
    assert accepted_count([5, 6, 7], [5, 6, 9]) == 2  # uncached: two accepted, then the verifier's own token
    assert accepted_count([5, 6, 7], [4]) == 0  # cached fast-path rejection: one plain token
    assert accepted_count([5, 6, 7], [5, 6, 7, 8]) == 3


def test_static_gate_uses_the_confidence_as_the_estimate():
    gate = AdaptiveLength(threshold=0.5)
    assert gate.cut([(11, 1.0), (12, 0.75), (13, 0.25), (14, 1.0)]) == [11, 12]
    gate.observe([1, 2, 3, 11, 12])  # static: nothing is learned
    assert gate.estimate(0.25) == 0.25


def test_online_gate_learns_acceptance_per_confidence_level_from_the_context():
    gate = AdaptiveLength(threshold=0.5, online=True)
    ctx = [1, 2, 3]
    assert gate.cut([(7, 0.75), (8, 0.75)], ctx) == [7, 8]
    gate.observe(ctx + [9])  # the first guess was rejected: level 0.75 reached once, accepted never
    b = level(0.75)
    assert gate._reached == {b: 1} and gate._accepted == {b: 0}
    assert gate.estimate(0.75) == pytest.approx(PRIOR_WEIGHT * 0.75 / (1 + PRIOR_WEIGHT))
    # keep rejecting guesses at 0.75: the estimate falls below the threshold and drafting stops there
    for _ in range(3):
        ctx = ctx + [9]
        gate.cut([(7, 0.75)], ctx)
        gate.observe(ctx + [9])
    assert gate.estimate(0.75) < 0.5
    assert gate.cut([(7, 0.75)], ctx) == []
    # a level that is always accepted stays in
    ctx = ctx + [9]
    assert gate.cut([(4, 1.0), (5, 1.0)], ctx) == [4, 5]
    gate.observe(ctx + [4, 5, 6])
    assert gate._accepted[level(1.0)] == 2 and gate.estimate(1.0) == 1.0


def test_online_gate_ignores_a_context_that_is_not_a_continuation_and_resets():
    gate = AdaptiveLength(threshold=0.5, online=True)
    gate.cut([(7, 0.75)], [1, 2, 3])
    gate.observe([9, 9, 9, 9])  # another prompt: nothing learned
    assert gate._reached == {}
    gate.cut([(7, 0.75)], [1, 2, 3])
    gate.observe([1, 2, 3, 7, 4])
    assert gate._accepted == {level(0.75): 1}
    gate.reset()
    assert gate._reached == {} and gate.estimate(0.75) == 0.75


def test_olifant_adaptive_stops_where_the_match_gets_shallow(tree):
    fixed = make_draft("olifant", ibase=tree)
    adaptive = make_draft("olifant", ibase=tree, gate=AdaptiveLength(threshold=0.25))
    known = [10, 11, 12, 13]
    scored = adaptive.scored(known, 5)
    assert [t for t, _ in scored] == fixed.propose(known, 5)
    tail = list(known)
    for token, conf in scored:  # the confidence is the lookup's depth over the window
        assert (token, conf) == (tree.lookup(tail)[0], tree.lookup(tail)[1] / 4)
        tail = tail[1:] + [token]
    assert adaptive.propose(known, 5) == fixed.propose(known, 5)  # every guess matched at depth >= 1
    unseen = [99, 99, 99, 99]  # no position value seen in training: the root's label, depth 0
    assert adaptive.scored(unseen, 1)[0][1] == 0.0
    assert adaptive.propose(unseen, 5) == []  # nothing worth a pass


def test_adaptive_options_keep_fixed_length_cell_keys():
    entry = lookup("olifant")
    plain = entry.parse({"corpus": "c"})
    assert plain.identity() == {}  # unchanged by the new options (cell keys stay)
    on = entry.parse({"corpus": "c", "adaptive": True, "threshold": 0.3, "online": True})
    assert on.identity() == {"adaptive": True, "threshold": 0.3, "online": True}
    with pytest.raises(DraftError, match="threshold"):
        entry.parse({"corpus": "c", "adaptive": True, "threshold": 1.5})


def test_build_passes_the_gate(tree, tmp_path):
    path = tmp_path / "t.igtree"
    tree.save(path)
    from workers.drafts import BuildContext

    draft = build_draft(
        "olifant", {"corpus": "c", "adaptive": True, "threshold": 0.9}, BuildContext(artifacts={"ibase": str(path)})
    )
    assert draft.gate is not None and draft.gate.threshold == 0.9


def test_olifant_confidence_by_the_matched_nodes_majority_share():
    """Hand-counted: after 1 the next token was 7, 7, 8 (share 2/3); the root: 9 in 5 of 8 (share 0.625)."""
    contexts = np.array([[1], [1], [1], [2], [2], [2], [2], [3]])
    tree = IGTree.fit(contexts, np.array([7, 7, 8, 9, 9, 9, 9, 9]))
    assert tree.lookup_scored([1]) == (7, 1, pytest.approx(2 / 3))
    assert tree.lookup_scored([2]) == (9, 0, 0.625)  # pruned: it agreed with the root, which decides
    assert tree.lookup_scored([5]) == (9, 0, 0.625)  # unseen
    share = make_draft("olifant", ibase=tree, gate=AdaptiveLength(threshold=0.65), confidence="share")
    assert share.scored([1], 2) == [(7, pytest.approx(2 / 3)), (9, 0.625)]
    assert share.propose([1], 2) == [7]
    both = make_draft("olifant", ibase=tree, gate=AdaptiveLength(threshold=0.6), confidence="depth_share")
    assert both.scored([1], 2) == [(7, pytest.approx(2 / 3)), (9, 0.0)]  # the second guess matched nothing
    with pytest.raises(DraftError, match="confidence='nope'"):
        make_draft("olifant", ibase=tree, confidence="nope")
    # the hybrid scores its instance-base guesses the same way (here the session has no match to offer)
    hybrid = make_draft("hybrid", ibase=tree, gate=AdaptiveLength(threshold=0.65), confidence="share", n=2, min_match=1)
    assert hybrid.scored([1], 2) == [(7, pytest.approx(2 / 3)), (9, 0.625)] and hybrid.sources == ["ibase"] * 2
    assert hybrid.propose([1], 2) == [7]


def test_olifant_confidence_enters_the_key_only_when_it_is_not_the_default():
    options = lookup("olifant").options
    assert "confidence" not in options(corpus="c", adaptive=True).identity()
    assert "confidence" not in options(corpus="c", confidence="share").identity()  # fixed length: unused
    assert options(corpus="c", adaptive=True, confidence="share").identity()["confidence"] == "share"
