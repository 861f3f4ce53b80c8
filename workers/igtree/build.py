"""The build: class priority, feature weights from count histograms, trie levels, pruning, per-depth arrays.

Everything here works on one *piece* of the tree: the whole instance set (the in-memory path) or the instances
whose most informative feature takes values in a range (a partition of the out-of-core path). Given the global
class priority and feature order, a piece's per-depth arrays are exactly the slice of the whole tree's arrays
for its depth-1 values: nodes are stored in path order, and every rule (labels, pruning against the parent,
depth 1 against the root's label) looks only at a node's own subtree and the global statistics.

Feature weights are computed from *count-of-counts* histograms (how many values, or (value, class) pairs,
occur exactly k times) summed with `math.fsum`: integer tables that merge exactly across partitions, and a
float result that does not depend on the order of the pieces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from workers.errors import IBaseError
from workers.igtree.counting import PAD, InstanceCounts, sort_rows, weighted_unique

ORDERS = ("gain_ratio", "info_gain")
TOP_CLASSES = 4  # classes kept per node with their counts (token trees branch on them); label stays the first


# ---------------------------------------------------------------------------------------------- statistics


def class_priority(class_counts: np.ndarray, class_first: np.ndarray) -> np.ndarray:
    """Class indices sorted by tie priority: more frequent first, then first appearance as a class."""
    return np.lexsort((class_first, -class_counts))


def count_hist(counts: np.ndarray) -> np.ndarray:
    """Count-of-counts of positive counts: (h, 2) int64 rows (k, how many entries equal k), k ascending."""
    counts = np.asarray(counts)
    k, freq = np.unique(counts[counts > 0], return_counts=True)
    return np.stack([k.astype(np.int64), freq.astype(np.int64)], axis=1)


def merge_hists(hists: Sequence[np.ndarray]) -> np.ndarray:
    """Sum count-of-counts histograms."""
    both = np.concatenate([h for h in hists if len(h)] or [np.zeros((0, 2), dtype=np.int64)])
    if not len(both):
        return both
    k, freq = weighted_unique(both[:, 0], both[:, 1])
    return np.stack([k, freq], axis=1)


def hist_entropy_sum(hist: np.ndarray) -> float:
    """sum n log2 n over the counts a histogram describes, exactly rounded (order-independent)."""
    k = hist[:, 0].astype(np.float64)
    return math.fsum((hist[:, 1].astype(np.float64) * (k * np.log2(k))).tolist())


def weights_from_hists(
    n: int, class_hist: np.ndarray, value_hists: Sequence[np.ndarray], pair_hists: Sequence[np.ndarray], order: str
) -> np.ndarray:
    """Gain ratio (or information gain) per position, in bits, from count-of-counts histograms; (w,) float64."""
    n = float(n)
    h_class = math.log2(n) - hist_entropy_sum(class_hist) / n
    weights = np.zeros(len(value_hists))
    for j, (hv, hvc) in enumerate(zip(value_hists, pair_hists)):
        ent_v = hist_entropy_sum(hv)
        gain = h_class - (ent_v - hist_entropy_sum(hvc)) / n
        split = math.log2(n) - ent_v / n
        weights[j] = gain if order == "info_gain" else (gain / split if split > 0 else 0.0)
    return weights


def feature_hists(c: InstanceCounts, cls: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per position: count-of-counts of its values and of its (value, class) pairs, over counted rows."""
    n_classes = int(cls.max()) + 1 if len(cls) else 1
    unit = bool(c.counts.max() == 1)  # one row per instance: a plain sort counts the pairs
    value_hists, pair_hists = [], []
    for j in range(c.window):
        keys = (c.rows[:, j] - PAD) * n_classes + cls
        uk, n_vc = weighted_unique(keys, None if unit else c.counts)
        values = uk // n_classes
        vstarts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
        value_hists.append(count_hist(np.add.reduceat(n_vc, vstarts)))
        pair_hists.append(count_hist(n_vc))
    return value_hists, pair_hists


def feature_weights(c: InstanceCounts, cls: np.ndarray, order: str) -> np.ndarray:
    """Gain ratio (or information gain) of each context position over counted rows, in bits; (w,) float64."""
    value_hists, pair_hists = feature_hists(c, cls)
    return weights_from_hists(int(c.counts.sum()), count_hist(c.class_counts), value_hists, pair_hists, order)


def feature_order(weights: np.ndarray) -> list[int]:
    """Positions by descending weight, exact ties to the lower position (TiMBL's strict `>` selection)."""
    return sorted(range(len(weights)), key=lambda j: (-weights[j], j))


def check_order(order, window: int) -> list[int] | None:
    """None for a rule name (weights decide), or the explicit permutation; refuse anything else."""
    if isinstance(order, str):
        if order not in ORDERS:
            raise IBaseError(f"igtree: order={order!r} is not accepted; use one of {ORDERS} or a permutation")
        return None
    positions = [int(j) for j in order]
    if sorted(positions) != list(range(window)):
        raise IBaseError(f"igtree: order={positions} is not a permutation of 0..{window - 1}")
    return positions


# ---------------------------------------------------------------------------------------------- the trie


def _node_stats(pair_node: np.ndarray, pair_cls: np.ndarray, pair_cnt: np.ndarray):
    """Per node (pairs sorted by node, then class priority): (label priority, majority count, total)."""
    starts = np.flatnonzero(np.r_[True, pair_node[1:] != pair_node[:-1]])
    total = np.add.reduceat(pair_cnt, starts)
    best = np.maximum.reduceat(pair_cnt, starts)
    is_best = pair_cnt == np.repeat(best, np.diff(np.append(starts, len(pair_cnt))))
    idx = np.flatnonzero(is_best)
    first = idx[np.r_[True, pair_node[idx][1:] != pair_node[idx][:-1]]]  # the highest-priority class among ties
    return pair_cls[first], best, total


def node_top(
    pair_node: np.ndarray, pair_cls: np.ndarray, pair_cnt: np.ndarray, n_nodes: int, top: int = TOP_CLASSES
) -> tuple[np.ndarray, np.ndarray]:
    """Per node its `top` most frequent classes (ties to the higher priority, as the label) and their counts:
    ((n_nodes, top) priority ranks, -1 where a node has fewer classes; (n_nodes, top) counts, 0 there)."""
    o = np.lexsort((pair_cls, -pair_cnt, pair_node))
    node, cls, cnt = pair_node[o], pair_cls[o], pair_cnt[o]
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]]) if len(node) else np.zeros(0, dtype=np.int64)
    rank = np.arange(len(node)) - np.repeat(starts, np.diff(np.append(starts, len(node))))
    sel = rank < top
    ranks = np.full((n_nodes, top), -1, dtype=np.int64)
    counts = np.zeros((n_nodes, top), dtype=np.int64)
    ranks[node[sel], rank[sel]] = cls[sel]
    counts[node[sel], rank[sel]] = cnt[sel]
    return ranks, counts


def top_of_counts(class_counts: np.ndarray, top: int = TOP_CLASSES) -> tuple[np.ndarray, np.ndarray]:
    """One node's top classes from its counts by priority rank: ((1, top) ranks, (1, top) counts), as `node_top`."""
    ranks = np.flatnonzero(class_counts)
    return node_top(np.zeros(len(ranks), dtype=np.int64), ranks, np.asarray(class_counts)[ranks], 1, top)


def trie_levels(x: np.ndarray, counts: np.ndarray | None, n_classes: int):
    """Unpruned trie levels of rows x (m, w+1): w shifted values (>= 0) in feature order, then class priority.

    Returns per depth 1..w (parent, value, label prio, majority count, total, top class prios (n, TOP_CLASSES),
    their counts); `counts` None means 1 per row.
    """
    w = x.shape[1] - 1
    srt = sort_rows(x, shift=0)
    x = x[srt]
    counts = np.ones(len(x), dtype=np.int64) if counts is None else counts[srt]
    change = np.zeros((w + 1, len(x)), dtype=bool)  # change[d, i]: row i starts a new node at depth d
    change[:, 0] = True
    for d in range(1, w + 1):
        change[d, 1:] = change[d - 1, 1:] | (x[1:, d - 1] != x[:-1, d - 1])
    pair_starts = np.flatnonzero(change[w] | np.r_[True, x[1:, w] != x[:-1, w]])
    pair_node = (np.cumsum(change[w], dtype=np.int64) - 1)[pair_starts]
    pair_cls, pair_cnt = x[pair_starts, w].astype(np.int64), np.add.reduceat(counts, pair_starts)
    del counts
    levels = []
    for d in range(w, 0, -1):
        starts = np.flatnonzero(change[d])
        label, best, total = _node_stats(pair_node, pair_cls, pair_cnt)
        top, top_count = node_top(pair_node, pair_cls, pair_cnt, len(starts))
        parent = (np.cumsum(change[d - 1], dtype=np.int64) - 1)[starts]  # node id at depth d-1 of each node
        levels.append((parent, x[starts, d - 1].astype(np.int64), label, best, total, top, top_count))
        keys, pair_cnt = weighted_unique(parent[pair_node] * n_classes + pair_cls, pair_cnt)
        pair_node, pair_cls = keys // n_classes, keys % n_classes
    return levels[::-1]


def prune(levels, root_label: int):
    """Bottom-up: drop every childless node whose label equals its parent's; returns keep masks per depth."""
    keep = [None] * len(levels)
    has_child = None
    for d in range(len(levels) - 1, -1, -1):
        parent, label = levels[d][0], levels[d][2]
        parent_label = levels[d - 1][2][parent] if d > 0 else np.full(len(label), root_label)
        keep[d] = label != parent_label
        if has_child is not None:
            keep[d] |= has_child
        has_child = np.zeros(len(levels[d - 1][0]) if d > 0 else 1, dtype=bool)
        has_child[parent[keep[d]]] = True
    return keep


def level_arrays(levels, keep, classes: np.ndarray) -> dict[str, np.ndarray]:
    """Per-depth int64 arrays of the kept nodes: value (shifted), label (token id), majority, total, children, and
    the top classes (token ids, TOP_CLASSES per node, flat) with their counts."""
    arrays: dict[str, np.ndarray] = {}
    for d, (_parent, value, label, best, total, top, top_count) in enumerate(levels, start=1):
        k = keep[d - 1]
        arrays[f"d{d}.value"] = value[k]
        arrays[f"d{d}.label"] = classes[label[k]].astype(np.int64)
        arrays[f"d{d}.majority"] = best[k].astype(np.int64)
        arrays[f"d{d}.total"] = total[k].astype(np.int64)
        if d < len(levels):
            child_parent = levels[d][0][keep[d]]  # parents (unpruned ids at depth d) of kept children
            arrays[f"d{d}.children"] = np.bincount(child_parent, minlength=len(k))[k].astype(np.int64)
        arrays.update(top_arrays(d, top[k], top_count[k], classes))
    return arrays


def top_arrays(d: int, top: np.ndarray, top_count: np.ndarray, classes: np.ndarray) -> dict[str, np.ndarray]:
    """Depth d's runner-up classes (the top classes after the label, which is the first), stored sparse: per node
    how many (`alt_n`), then all nodes' token ids (`alt_label`) and counts (`alt_count`) flat, in node order; from
    (n, TOP_CLASSES) priority ranks (-1: none) and counts."""
    alt, alt_count = top[:, 1:], top_count[:, 1:]
    has = alt_count > 0
    tokens = classes[alt[has]] if len(classes) else np.zeros(0, dtype=np.int64)
    return {
        f"d{d}.alt_n": has.sum(axis=1).astype(np.int64),
        f"d{d}.alt_label": tokens.astype(np.int64),
        f"d{d}.alt_count": alt_count[has].astype(np.int64),
    }


def build_piece(
    x: np.ndarray, counts: np.ndarray | None, classes: np.ndarray, root_label: int = 0
) -> tuple[dict[str, np.ndarray], int, int]:
    """One piece of the tree from rows x (see `trie_levels`): (int64 arrays, nodes before, nodes after pruning).

    `classes` maps priority rank -> token id; the root's label is rank 0 (the most frequent class, first seen).
    A subtree under a node (rows without that node's columns) passes the node's label rank as `root_label`.
    """
    levels = trie_levels(x, counts, len(classes))
    keep = prune(levels, root_label=root_label)
    arrays = level_arrays(levels, keep, classes)
    return arrays, int(sum(len(lv[0]) for lv in levels)), int(sum(int(k.sum()) for k in keep))


def array_names(window: int) -> list[str]:
    """The per-depth array names in file order."""
    names = []
    for d in range(1, window + 1):
        names += [f"d{d}.{f}" for f in ("value", "label", "majority", "total")]
        if d < window:
            names.append(f"d{d}.children")
        names += [f"d{d}.alt_n", f"d{d}.alt_label", f"d{d}.alt_count"]
    return names


def min_uint_dtype(top: int) -> np.dtype:
    """The smallest unsigned dtype that holds values up to `top`."""
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if top <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise IBaseError(f"igtree: value {top} does not fit in 64 bits")


def min_uint(a: np.ndarray) -> np.ndarray:
    """`a` (non-negative ints) in the smallest unsigned dtype that holds it."""
    return a.astype(min_uint_dtype(int(a.max()) if len(a) else 0))


def tree_meta(
    meta: dict,
    *,
    positions: list[int],
    order,
    weights: np.ndarray,
    n_instances: int,
    classes: np.ndarray,
    class_counts_by_prio: np.ndarray,
    nodes: tuple[int, int],
) -> dict:
    """The metadata a tree carries: the same dict whether it was built in memory or in partitions. `positions` is
    the feature order, a permutation of the window's positions (so its length is the window)."""
    return {
        **meta,
        "window": len(positions),
        "order": positions,
        "order_rule": order if isinstance(order, str) else "given",
        "weights": [float(x) for x in weights],
        "instances": int(n_instances),
        "classes": int(len(classes)),
        "nodes_before_prune": int(nodes[0]),
        "nodes_after_prune": int(nodes[1]),
        "root": {
            "label": int(classes[0]),
            "majority": int(class_counts_by_prio[0]),
            "total": int(n_instances),
            "top": [[int(classes[i]), int(class_counts_by_prio[i])] for i in range(min(TOP_CLASSES, len(classes)))],
        },
    }
