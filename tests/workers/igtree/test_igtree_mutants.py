"""IGTree on tiny hand-counted instance sets: explicit orders, counted rows, exact values, batch lookups, load errors.

Each expected value is counted by hand in the comments (or is TiMBL's answer); these cases pin down what the
real-text tests in test_igtree.py cannot reach: an order given as positions, rows counted more than once, class
ids far above the number of instances, narrow integer contexts, a one-node tree.
"""

from __future__ import annotations

import logging
import re
import tracemalloc

import numpy as np
import pytest

from workers.errors import IBaseError
from workers.igtree import PAD, IGTree, TimblIGTree, count_instances
from workers.igtree.tree import _row_classes, context_tail

# Window 2, three instances. Targets: 7, 7, 8. Root: 7 (2 of 3).
# With the order given as [1, 0] (the last token first): depth 1 = last token, depth 2 = the one before.
#   depth 1: 5 -> {7, 7}: label 7;  6 -> {8}: label 8
#   depth 2: (5, 1) -> 7;  (5, 2) -> 7;  (6, 3) -> 8
# Pruning bottom-up: every depth-2 node agrees with its parent, so all three go; then 5 (label 7, no child)
# agrees with the root and goes; 6 (label 8) stays. Nodes: 2 + 3 = 5 before, 1 after.
CONTEXTS = [[1, 5], [2, 5], [3, 6]]
TARGETS = [7, 7, 8]


def _peak_bytes(fn):
    """(fn(), the peak of memory traced by tracemalloc while it ran, in bytes)."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------------------------------------- explicit order


def test_explicit_order_is_kept_and_carries_zero_weights():
    tree = IGTree.fit(np.array(CONTEXTS), np.array(TARGETS), order=[1, 0])
    assert tree.order == [1, 0] and tree.meta["order"] == [1, 0] and tree.meta["order_rule"] == "given"
    assert tree.meta["weights"] == [0.0, 0.0]  # no statistics are computed for a given order
    assert (tree.meta["nodes_before_prune"], tree.n_nodes) == (5, 1)
    assert tree.arrays["d1.value"].tolist() == [6 - PAD] and tree.arrays["d1.label"].tolist() == [8]
    assert tree.arrays["d1.children"].tolist() == [0] and len(tree.arrays["d2.value"]) == 0
    # the first position is unseen (9), the last one decides: only the order [1, 0] answers 8 here
    assert tree.lookup([9, 6]) == (8, 1)
    assert tree.lookup([1, 5]) == (7, 0)  # 5 was pruned: the root answers
    assert tree.predict_batch(np.array([[9, 6], [3, 9]])).tolist() == [8, 7]


def test_gain_ratio_order_of_the_same_instances():
    # H(class) = H(2/3, 1/3) = 0.918296 bit. Position 0: three pure values, IG 0.918296, split log2(3) = 1.584963:
    # GR 0.579380. Position 1: 5 -> {7, 7}, 6 -> {8}: IG 0.918296, split H(2/3, 1/3): GR 1. Order [1, 0].
    tree = IGTree.fit(np.array(CONTEXTS), np.array(TARGETS))
    assert tree.order == [1, 0] and tree.meta["order_rule"] == "gain_ratio"
    assert tree.meta["weights"] == pytest.approx([0.579380, 1.0], abs=1e-6)
    assert tree.n_nodes == 1 and tree.lookup([9, 6]) == (8, 1)


def test_build_logs_instances_order_and_node_counts(caplog):
    caplog.set_level(logging.INFO, logger="workers.igtree.tree")
    IGTree.fit(np.array(CONTEXTS), np.array(TARGETS), order=[1, 0])
    messages = [r.getMessage() for r in caplog.records if r.name == "workers.igtree.tree"]
    assert messages == ["igtree: 3 instances, order [1, 0], 5 -> 1 nodes"]


# ---------------------------------------------------------------------------------------------- counted rows


def test_from_counts_weighs_rows_counted_twice(tmp_path):
    # Window 1. Instances (value -> target): 1->6, 2->5, 1->5, 2->5, 1->6. Counted: (1, 5) x1, (1, 6) x2, (2, 5) x2,
    # so the largest count is 2. Classes: 5 three times, 6 twice: root 5 (3 of 5).
    # Node 1: 6 twice, 5 once: label 6 (2 of 3), kept. Node 2: 5 twice: label 5 = the root's, pruned.
    x, y = np.array([[1], [2], [1], [2], [1]]), np.array([6, 5, 5, 5, 6])
    counts = count_instances(x, y)
    assert counts.counts.tolist() == [1, 2, 2]
    tree = IGTree.from_counts(counts)
    assert (tree.meta["nodes_before_prune"], tree.n_nodes) == (2, 1)
    assert [tree.arrays[f"d1.{f}"].tolist() for f in ("value", "label", "majority", "total")] == [[2], [6], [2], [3]]
    assert tree.lookup_scored([1]) == (6, 1, pytest.approx(2 / 3))
    assert tree.lookup_scored([2]) == (5, 0, pytest.approx(3 / 5))
    assert tree.meta["root"] == {"label": 5, "majority": 3, "total": 5, "top": [[5, 3], [6, 2]]}
    assert tree.lookup_top([1]) == ([(6, 2), (5, 1)], 3, 1)  # the counted rows weigh in the top classes too
    timbl = TimblIGTree.fit(x, y, workdir=tmp_path)
    assert [timbl.predict([v]) for v in (1, 2, 3)] == [6, 5, 5] == [tree.predict([v]) for v in (1, 2, 3)]
    assert timbl.n_nodes == 1


# ---------------------------------------------------------------------------------------------- class ids and values


@pytest.mark.parametrize("targets", [[5, 7, 7], [100_000, 200_000, 200_000]], ids=["dense-ids", "sparse-ids"])
def test_context_values_beyond_float_precision_are_kept_exact(targets):
    # Window 1. 2**53 -> targets[0]; 0 -> targets[1] twice: root targets[1] (2 of 3); node 0 agrees and is pruned,
    # node 2**53 (stored shifted: 2**53 + 1, which a float64 would round to 2**53) is kept.
    # Sparse ids (200_000 >= 4 * 3 + 2**16) take the binary-search path of the class ranks, dense ones the table.
    tree = IGTree.fit(np.array([[2**53], [0], [0]]), np.array(targets))
    assert tree.arrays["d1.value"].tolist() == [2**53 + 1]
    assert tree.lookup([2**53]) == (targets[0], 1)
    assert tree.lookup([2**53 - 1]) == (targets[1], 0)
    assert tree.lookup_batch(np.array([[2**53], [2**53 - 1], [0]]))[0].tolist() == [targets[0], targets[1], targets[1]]


@pytest.mark.parametrize("class_id", [65_548, 131_000])
def test_sparse_class_ids_are_ranked_without_a_table_sized_by_the_id(class_id):
    # 3 rows: a table of class ranks is built only while the largest id < 4 * 3 + 2**16 = 65_548 (8 bytes an entry);
    # above, a binary search over the 2 ids, which allocates a few dozen bytes.
    # Ranks, by class index (ids ascending: 5, class_id): 5 twice (rank 0), class_id once (rank 1).
    counts = count_instances(np.array([[1], [2], [2]]), np.array([class_id, 5, 5]), dedup=False)
    ranks, peak = _peak_bytes(lambda: _row_classes(counts, np.array([0, 1])))
    assert ranks.tolist() == [1, 0, 0] and ranks.dtype == np.int64
    assert peak < 64 * 1024
    tree = IGTree.fit(np.array([[1], [2], [2]]), np.array([class_id, 5, 5]))
    assert [tree.predict([v]) for v in (1, 2, 3)] == [class_id, 5, 5]


def test_dense_class_ids_are_ranked_through_a_table():
    # 65_547 < 4 * 3 + 2**16: the table (65_548 entries of 8 bytes) is the fast path, taken up to the bound
    counts = count_instances(np.array([[1], [2], [2]]), np.array([65_547, 5, 5]), dedup=False)
    ranks, peak = _peak_bytes(lambda: _row_classes(counts, np.array([0, 1])))
    assert ranks.tolist() == [1, 0, 0] and ranks.dtype == np.int64
    assert peak >= 65_548 * 8


# ---------------------------------------------------------------------------------------------- batch lookups


def test_lookup_batch_refuses_wrong_shapes():
    tree = IGTree.fit(np.array(CONTEXTS), np.array(TARGETS), order=[1, 0])
    with pytest.raises(IBaseError, match=re.escape("igtree: contexts must be (B, 2); got (2,)")):
        tree.lookup_batch([1, 5])
    with pytest.raises(IBaseError, match=re.escape("igtree: contexts must be (B, 2); got (1, 3)")):
        tree.lookup_batch([[1, 5, 6]])


def test_lookup_batch_of_narrow_int_contexts_and_int64_answers():
    # Window 1: 32767 -> 9; 1 -> 4 twice. Root 4; node 1 pruned; node 32767 (stored 32768) kept.
    # An int16 context holds 32767, but 32767 - PAD does not fit in int16: the lookup must widen first.
    tree = IGTree.fit(np.array([[32767], [1], [1]]), np.array([9, 4, 4]))
    labels, depths = tree.lookup_batch(np.array([[32767], [1], [PAD]], dtype=np.int16))
    assert labels.tolist() == [9, 4, 4] and depths.tolist() == [1, 0, 0]
    assert labels.dtype == np.int64 and depths.dtype == np.int64
    assert tree.predict_batch(np.array([[32767]], dtype=np.int16)).dtype == np.int64
    label, depth = tree.lookup([32767])
    assert (label, depth) == (9, 1) and type(label) is int and type(depth) is int


def test_lookup_batch_on_a_one_node_tree():
    # Window 1: 1 -> 5 twice, 2 -> 6. Root 5; node 1 pruned; node 2 (key 0 << 32 | 3) is the only node.
    # 9 (key 10) sorts after it, 0 (key 1) before it: both fall back to the root.
    tree = IGTree.fit(np.array([[1], [1], [2]]), np.array([5, 5, 6]))
    assert tree.n_nodes == 1
    labels, depths = tree.lookup_batch(np.array([[9], [2], [0], [1]]))
    assert labels.tolist() == [5, 6, 5, 5] and depths.tolist() == [0, 1, 0, 0]


def test_context_tail_pads_on_the_left_and_keeps_the_last_window():
    assert context_tail([], 3) == [PAD, PAD, PAD]
    assert context_tail([4, 5], 3) == [PAD, 4, 5]
    assert context_tail([1, 2, 3], 3) == [1, 2, 3]
    tail = context_tail(np.array([1, 2, 3, 4]), 3)
    assert tail == [2, 3, 4] and all(type(t) is int for t in tail)


# ---------------------------------------------------------------------------------------------- load


def test_load_names_both_tokenizers_when_they_differ(tmp_path):
    tree = IGTree.fit(np.array(CONTEXTS), np.array(TARGETS), tokenizer_id="v32000-abc")
    tree.save(tmp_path / "m.igtree")
    with pytest.raises(IBaseError, match=re.escape("built for tokenizer 'v32000-abc', not 'v50257-def'; retrain it")):
        IGTree.load(tmp_path / "m.igtree", tokenizer_id="v50257-def")
    IGTree.fit(np.array(CONTEXTS), np.array(TARGETS)).save(tmp_path / "anon.igtree")
    with pytest.raises(IBaseError, match=re.escape("built for tokenizer None, not 'v50257-def'")):
        IGTree.load(tmp_path / "anon.igtree", tokenizer_id="v50257-def")
