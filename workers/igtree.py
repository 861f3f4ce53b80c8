"""IGTree (TiMBL `-a1`) over fixed windows of token ids: our numpy engine and TiMBL itself, same interface.

The rules, checked against TiMBL 6.10 (see DESIGN.md): features ordered by descending gain ratio, exact ties
to the lower position; a node's label is its most frequent class, ties to the class more frequent in the whole
training set, then to the class that appeared first *as a class* in training order; every childless node whose
label equals its parent's is pruned bottom-up; a query returns the label of the deepest matching node (the
root's label when the first value is unseen).

Training counts, then builds: `count_instances` reduces a shard of instances to (row, count) tables plus class
statistics, `merge_counts` concatenates shards in training order, `IGTree.from_counts` builds the tree. Every
quantity the build uses is an integer sum over those tables, so N shards give a bit-identical tree to one piece.

Example:
    >>> tree = IGTree.fit(contexts, targets)          # contexts (n, 4) int, targets (n,) int
    >>> tree.predict([1, 415, 2936, 302])
    28725
    >>> tree.lookup([1, 415, 2936, 302])              # (token, depth of the deepest matching node)
    (28725, 3)
    >>> tree.save("plays.igtree"); IGTree.load("plays.igtree", window=4).predict([1, 415, 2936, 302])
    28725
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workers.errors import IBaseError

logger = logging.getLogger(__name__)

PAD = -1  # left padding of contexts shorter than the window (document starts); never a token id
ORDERS = ("gain_ratio", "info_gain")
MAGIC = b"GSIGTREE"
FORMAT_VERSION = 1
_PREAMBLE = struct.Struct("<8sII32s")  # magic, format version, header length, sha256 of the header
_ALIGN = 64


# ----------------------------------------------------------------------------------------------------------
# counting (per shard) and merging


@dataclass(frozen=True)
class InstanceCounts:
    """Instances reduced to counted rows: rows (m, w+1) = context values + target, with class statistics.

    `class_first` is the index (in training order over all shards) of the instance where each class first
    appeared as a target; it breaks ties between equally frequent classes.
    """

    rows: np.ndarray  # (m, w+1) int64: w context values, then the target
    counts: np.ndarray  # (m,) int64
    class_ids: np.ndarray  # (C,) int64, ascending
    class_counts: np.ndarray  # (C,) int64
    class_first: np.ndarray  # (C,) int64
    n_instances: int

    @property
    def window(self) -> int:
        """The number of context positions."""
        return self.rows.shape[1] - 1


def count_instances(contexts: np.ndarray, targets: np.ndarray, offset: int = 0, dedup: bool = True) -> InstanceCounts:
    """Count one shard of instances; `offset` is the index of its first instance in the whole training order.

    `dedup=False` keeps one row per instance (count 1): cheaper when the table is built on right away.
    """
    contexts, targets = _check_instances(contexts, targets)
    rows = np.concatenate([contexts, targets[:, None]], axis=1)
    counts = np.ones(len(rows), dtype=np.int64)
    if dedup:
        rows = rows[_sort_rows(rows)]
        starts = _run_starts(rows)
        counts = np.diff(np.append(starts, len(rows)))
        rows = rows[starts]
    class_ids, first, class_counts = np.unique(targets, return_index=True, return_counts=True)
    return InstanceCounts(
        rows=rows,
        counts=counts.astype(np.int64),
        class_ids=class_ids.astype(np.int64),
        class_counts=class_counts.astype(np.int64),
        class_first=first.astype(np.int64) + int(offset),
        n_instances=len(targets),
    )


def merge_counts(parts: Sequence[InstanceCounts]) -> InstanceCounts:
    """Merge shard counts (each counted with its global `offset`) into one table; rows may repeat."""
    if not parts:
        raise IBaseError("merge_counts: no shards given; pass at least one InstanceCounts")
    if len({p.window for p in parts}) != 1:
        raise IBaseError(f"merge_counts: shards disagree on the window ({sorted({p.window for p in parts})})")
    ids = np.concatenate([p.class_ids for p in parts])
    class_ids, inverse = np.unique(ids, return_inverse=True)
    class_counts = np.bincount(inverse, weights=np.concatenate([p.class_counts for p in parts]))
    class_first = np.full(len(class_ids), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(class_first, inverse, np.concatenate([p.class_first for p in parts]))
    return InstanceCounts(
        rows=np.concatenate([p.rows for p in parts]),
        counts=np.concatenate([p.counts for p in parts]),
        class_ids=class_ids.astype(np.int64),
        class_counts=np.rint(class_counts).astype(np.int64),
        class_first=class_first,
        n_instances=sum(p.n_instances for p in parts),
    )


def _check_instances(contexts, targets) -> tuple[np.ndarray, np.ndarray]:
    """Validate shapes and values; return int64 copies-or-views."""
    contexts = np.asarray(contexts)
    targets = np.asarray(targets)
    if contexts.ndim != 2 or targets.ndim != 1 or len(contexts) != len(targets):
        raise IBaseError(f"instances: contexts must be (n, w) and targets (n,); got {contexts.shape} and {targets.shape}")
    if len(targets) == 0:
        raise IBaseError("instances: no instances to train on; give at least one (context, target) pair")
    if contexts.shape[1] < 1:
        raise IBaseError("instances: window must be at least 1")
    if not (np.issubdtype(contexts.dtype, np.integer) and np.issubdtype(targets.dtype, np.integer)):
        raise IBaseError(f"instances: contexts/targets must be integer arrays; got {contexts.dtype}/{targets.dtype}")
    if contexts.min() < PAD or targets.min() < 0:
        raise IBaseError(f"instances: token ids must be >= 0 (contexts may hold PAD={PAD}); got a smaller value")
    return contexts.astype(np.int64, copy=False), targets.astype(np.int64, copy=False)


# ----------------------------------------------------------------------------------------------------------
# row sorting helpers: pack non-negative int columns into as few uint64 words as fit, then lexsort the words


def _pack(cols: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Pack non-negative int columns (most significant first) into uint64 words, most significant word first."""
    words: list[np.ndarray] = []
    word, used = None, 0
    for col in cols:
        bits = max(1, int(col.max()).bit_length()) if len(col) else 1
        if word is None or used + bits > 64:
            if word is not None:
                words.append(word)
            word, used = np.zeros(len(col), dtype=np.uint64), 0
        word = (word << np.uint64(bits)) | col.astype(np.uint64)
        used += bits
    words.append(word)
    return words


def _sort_rows(rows: np.ndarray) -> np.ndarray:
    """Indices that sort rows lexicographically (PAD-shifted columns, first column most significant)."""
    cols = [rows[:, j] - PAD for j in range(rows.shape[1])]
    if max(int(col.max()) for col in cols) < 2**16:  # numpy radix-sorts 16-bit keys: one O(n) pass per column
        return np.lexsort([col.astype(np.uint16) for col in cols[::-1]])
    words = _pack(cols)
    if len(words) == 1:
        return np.argsort(words[0], kind="stable")
    return np.lexsort(words[::-1])


def _run_starts(rows: np.ndarray) -> np.ndarray:
    """Start indices of runs of equal rows in sorted rows."""
    change = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        change[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    return np.flatnonzero(change)


# ----------------------------------------------------------------------------------------------------------
# the build


def _class_priority(c: InstanceCounts) -> np.ndarray:
    """Class indices (into c.class_ids) sorted by tie priority: more frequent first, then first appearance."""
    return np.lexsort((c.class_first, -c.class_counts))


def feature_weights(c: InstanceCounts, cls: np.ndarray, order: str) -> np.ndarray:
    """Gain ratio (or information gain) of each context position, in bits; (w,) float64."""
    n = float(c.counts.sum())
    ent = _entropy_sum(c.class_counts)  # sum n_c log2 n_c
    h_class = np.log2(n) - ent / n
    weights = np.zeros(c.window)
    n_classes = len(c.class_ids)
    unit = bool(c.counts.max() == 1)  # one row per instance: a plain sort counts the pairs
    for j in range(c.window):
        keys = (c.rows[:, j] - PAD) * n_classes + cls
        uk, n_vc = _weighted_unique(keys, None if unit else c.counts)
        values = uk // n_classes
        vstarts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
        n_v = np.add.reduceat(n_vc, vstarts)
        gain = h_class - (_entropy_sum(n_v) - _entropy_sum(n_vc)) / n
        split = np.log2(n) - _entropy_sum(n_v) / n
        weights[j] = gain if order == "info_gain" else (gain / split if split > 0 else 0.0)
    return weights


def _weighted_unique(keys: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and the summed weights (or occurrence counts) of each."""
    if weights is None:
        uk, n = np.unique(keys, return_counts=True)
        return uk, n.astype(np.int64)
    o = np.argsort(keys, kind="stable")
    ks = keys[o]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    return ks[starts], np.add.reduceat(weights[o], starts)


def _entropy_sum(counts: np.ndarray) -> float:
    """sum n log2 n over positive counts."""
    x = counts[counts > 0].astype(np.float64)
    return float(np.sum(x * np.log2(x)))


def feature_order(weights: np.ndarray) -> list[int]:
    """Positions by descending weight, exact ties to the lower position (TiMBL's strict `>` selection)."""
    return sorted(range(len(weights)), key=lambda j: (-weights[j], j))


def _node_stats(pair_node: np.ndarray, pair_cls: np.ndarray, pair_cnt: np.ndarray):
    """Per node (pairs sorted by node, then class priority): (label priority, majority count, total)."""
    starts = np.flatnonzero(np.r_[True, pair_node[1:] != pair_node[:-1]])
    total = np.add.reduceat(pair_cnt, starts)
    best = np.maximum.reduceat(pair_cnt, starts)
    is_best = pair_cnt == np.repeat(best, np.diff(np.append(starts, len(pair_cnt))))
    idx = np.flatnonzero(is_best)
    first = idx[np.r_[True, pair_node[idx][1:] != pair_node[idx][:-1]]]  # the highest-priority class among ties
    return pair_cls[first], best, total


def _levels(c: InstanceCounts, cls: np.ndarray, order: list[int]):
    """Unpruned trie levels along `order`: per depth (parent, value, label prio, majority count, total)."""
    w = c.window
    x = np.concatenate([c.rows[:, order], cls[:, None]], axis=1)
    srt = _sort_rows(x)
    x, counts = x[srt], c.counts[srt]
    change = np.zeros((w + 1, len(x)), dtype=bool)  # change[d, i]: row i starts a new node at depth d
    change[:, 0] = True
    diff = x[1:] != x[:-1]
    for d in range(1, w + 1):
        change[d, 1:] = change[d - 1, 1:] | diff[:, d - 1]
    node_of_row = np.cumsum(change, axis=1, dtype=np.int64) - 1  # (w+1, m) node id per row at each depth
    pair_starts = np.flatnonzero(change[w] | np.r_[True, diff[:, w]])
    pair_node, pair_cls = node_of_row[w][pair_starts], x[pair_starts, w]
    pair_cnt = np.add.reduceat(counts, pair_starts)
    levels = []
    for d in range(w, 0, -1):
        starts = np.flatnonzero(change[d])
        label, best, total = _node_stats(pair_node, pair_cls, pair_cnt)
        parent = node_of_row[d - 1][starts]
        levels.append((parent, x[starts, d - 1], label, best, total))
        n_classes = len(c.class_ids)
        keys, pair_cnt = _weighted_unique(parent[pair_node] * n_classes + pair_cls, pair_cnt)
        pair_node, pair_cls = keys // n_classes, keys % n_classes
    root = _node_stats(pair_node, pair_cls, pair_cnt)
    return levels[::-1], (int(root[0][0]), int(root[1][0]), int(root[2][0]))


def _prune(levels, root_label: int):
    """Bottom-up: drop every childless node whose label equals its parent's; returns keep masks per depth."""
    keep = [None] * len(levels)
    has_child = None
    for d in range(len(levels) - 1, -1, -1):
        parent, _, label, _, _ = levels[d]
        parent_label = levels[d - 1][2][parent] if d > 0 else np.full(len(label), root_label)
        keep[d] = label != parent_label
        if has_child is not None:
            keep[d] |= has_child
        has_child = np.zeros(len(levels[d - 1][0]) if d > 0 else 1, dtype=bool)
        has_child[parent[keep[d]]] = True
    return keep


def _min_uint(a: np.ndarray) -> np.ndarray:
    """`a` (non-negative ints) in the smallest unsigned dtype that holds it."""
    top = int(a.max()) if len(a) else 0
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if top <= np.iinfo(dt).max:
            return a.astype(dt)
    raise IBaseError(f"igtree: value {top} does not fit in 64 bits")


# ----------------------------------------------------------------------------------------------------------
# the engine


class IGTree:
    """A pruned IGTree over windows of `window` token ids; per node: label, majority count, total count.

    Storage per depth d (1..window), nodes in (parent, value) order: `value` (token id - PAD), `label`,
    `majority`, `total`, and for d < window `children` (kept children per node). The root lives in `meta`.
    """

    def __init__(self, arrays: dict[str, np.ndarray], meta: dict):
        self.arrays = arrays
        self.meta = meta
        self.window = int(meta["window"])
        self.order = [int(j) for j in meta["order"]]
        self.root_label = int(meta["root"]["label"])
        self._index: dict[int, int] | None = None
        self._labels: list[int] | None = None
        self._keys: np.ndarray | None = None

    # -- training ------------------------------------------------------------------------------------------

    @classmethod
    def fit(cls, contexts, targets, order: str | Sequence[int] = "gain_ratio", **meta) -> IGTree:
        """Train on contexts (n, w) int and targets (n,) int; `order`: gain_ratio, info_gain or positions."""
        return cls.from_counts(count_instances(contexts, targets, dedup=False), order=order, **meta)

    @classmethod
    def from_counts(cls, counts: InstanceCounts, order: str | Sequence[int] = "gain_ratio", **meta) -> IGTree:
        """Build the pruned tree from (merged) instance counts."""
        prio = np.empty(len(counts.class_ids), dtype=np.int64)
        by_prio = _class_priority(counts)
        prio[by_prio] = np.arange(len(by_prio))
        row_cls = _row_classes(counts, prio)
        weights, positions = _resolve_order(counts, row_cls, order)
        levels, (root_prio, root_best, root_total) = _levels(counts, row_cls, positions)
        keep = _prune(levels, root_prio)
        classes = counts.class_ids[by_prio]  # priority rank -> token id
        arrays = _level_arrays(levels, keep, classes)
        meta = {
            **meta,
            "window": counts.window,
            "order": positions,
            "order_rule": order if isinstance(order, str) else "given",
            "weights": [float(x) for x in weights],
            "instances": int(counts.n_instances),
            "classes": int(len(classes)),
            "nodes_before_prune": int(sum(len(lv[0]) for lv in levels)),
            "nodes_after_prune": int(sum(int(k.sum()) for k in keep)),
            "root": {"label": int(classes[root_prio]), "majority": root_best, "total": root_total},
        }
        logger.info("igtree: %d instances, order %s, %d -> %d nodes", counts.n_instances, positions,
                    meta["nodes_before_prune"], meta["nodes_after_prune"])
        return cls(arrays, meta)

    # -- queries -------------------------------------------------------------------------------------------

    def lookup(self, context: Sequence[int]) -> tuple[int, int]:
        """(label of the deepest matching node, its depth: 0 = root) for the last `window` tokens of context."""
        index, labels = self._single_index()
        tail = _tail(context, self.window)
        node, depth = 0, 0
        for pos in self.order:
            child = index.get((node << 32) | (tail[pos] - PAD))
            if child is None:
                break
            node, depth = child, depth + 1
        return labels[node], depth

    def predict(self, context: Sequence[int]) -> int:
        """The predicted next token for the last `window` tokens of context (left-padded with PAD if short)."""
        return self.lookup(context)[0]

    def predict_batch(self, contexts) -> np.ndarray:
        """Predictions for contexts (B, window) int; (B,) int64."""
        return self.lookup_batch(contexts)[0]

    def lookup_batch(self, contexts) -> tuple[np.ndarray, np.ndarray]:
        """(labels (B,), depths (B,)) for contexts (B, window), vectorised with searchsorted."""
        x = np.asarray(contexts, dtype=np.int64)
        if x.ndim != 2 or x.shape[1] != self.window:
            raise IBaseError(f"igtree: contexts must be (B, {self.window}); got {x.shape}")
        keys = self._sorted_keys()
        node = np.zeros(len(x), dtype=np.int64)
        depth = np.zeros(len(x), dtype=np.int64)
        alive = np.ones(len(x), dtype=bool)
        for pos in self.order:
            want = (node << 32) | (x[:, pos] - PAD)
            at = np.minimum(np.searchsorted(keys, want), max(len(keys) - 1, 0))
            found = alive & (keys[at] == want) if len(keys) else np.zeros(len(x), dtype=bool)
            node = np.where(found, at + 1, node)
            depth += found
            alive = found
        return self._label_array()[node], depth

    def __getstate__(self) -> dict:
        """Pickle the arrays and metadata, not the lookup caches (rebuilt on first use)."""
        return {"arrays": {k: np.asarray(a) for k, a in self.arrays.items()}, "meta": self.meta}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["arrays"], state["meta"])

    # -- derived indexes (built lazily: load stays a header read + mmap) ------------------------------------

    def _label_array(self) -> np.ndarray:
        """Labels of all nodes in global order (root first), int64."""
        parts = [np.array([self.root_label])]
        parts += [self.arrays[f"d{d}.label"].astype(np.int64) for d in range(1, self.window + 1)]
        return np.concatenate(parts)

    def _sorted_keys(self) -> np.ndarray:
        """Key (parent global id << 32 | value) of every non-root node, ascending = global node order."""
        if self._keys is None:
            parts, first, parent_ids = [], 1, np.zeros(1, dtype=np.int64)
            for d in range(1, self.window + 1):
                value = self.arrays[f"d{d}.value"].astype(np.int64)
                parts.append((parent_ids << 32) | value)
                if d < self.window:
                    ids = np.arange(first, first + len(value), dtype=np.int64)
                    parent_ids = np.repeat(ids, self.arrays[f"d{d}.children"].astype(np.int64))
                first += len(value)
            self._keys = np.concatenate(parts)
        return self._keys

    def _single_index(self) -> tuple[dict[int, int], list[int]]:
        """A dict key -> node id and a list of labels, for fast single queries."""
        if self._index is None:
            keys = self._sorted_keys()
            self._index = dict(zip(keys.tolist(), range(1, len(keys) + 1)))
            self._labels = self._label_array().tolist()
        return self._index, self._labels

    # -- storage -------------------------------------------------------------------------------------------

    @property
    def n_nodes(self) -> int:
        """Nodes after pruning, the root excluded (TiMBL's count)."""
        return int(self.meta["nodes_after_prune"])

    def save(self, path) -> int:
        """Write the tree atomically to `path`; returns the file size in bytes."""
        return _write_file(Path(path), self.arrays, self.meta)

    @classmethod
    def load(cls, path, *, tokenizer_id: str | None = None, window: int | None = None, verify: bool = True) -> IGTree:
        """Memory-map a saved tree; refuse a truncated/corrupt file or one for another tokenizer/window."""
        arrays, meta = _read_file(Path(path), verify=verify)
        if tokenizer_id is not None and meta.get("tokenizer_id") != tokenizer_id:
            raise IBaseError(f"{path}: built for tokenizer {meta.get('tokenizer_id')!r}, not {tokenizer_id!r}; retrain it")
        if window is not None and int(meta["window"]) != int(window):
            raise IBaseError(f"{path}: built for window {meta['window']}, not {window}; retrain it")
        return cls(arrays, meta)


def _row_classes(counts: InstanceCounts, prio: np.ndarray) -> np.ndarray:
    """Class priority rank of each row's target; (m,) int64."""
    targets = counts.rows[:, counts.window]
    if counts.class_ids[-1] < 4 * len(targets) + 2**16:  # a dense lookup table beats a binary search
        lut = np.zeros(int(counts.class_ids[-1]) + 1, dtype=np.int64)
        lut[counts.class_ids] = prio
        return lut[targets]
    return prio[np.searchsorted(counts.class_ids, targets)]


def _resolve_order(counts: InstanceCounts, cls: np.ndarray, order) -> tuple[np.ndarray, list[int]]:
    """(feature weights, position order) for a rule name or an explicit permutation."""
    w = counts.window
    if isinstance(order, str):
        if order not in ORDERS:
            raise IBaseError(f"igtree: order={order!r} is not accepted; use one of {ORDERS} or a permutation")
        weights = feature_weights(counts, cls, order)
        return weights, feature_order(weights)
    positions = [int(j) for j in order]
    if sorted(positions) != list(range(w)):
        raise IBaseError(f"igtree: order={positions} is not a permutation of 0..{w - 1}")
    return np.zeros(w), positions


def _level_arrays(levels, keep, classes: np.ndarray) -> dict[str, np.ndarray]:
    """Compact per-depth arrays of the kept nodes."""
    arrays: dict[str, np.ndarray] = {}
    for d, (parent, value, label, best, total) in enumerate(levels, start=1):
        k = keep[d - 1]
        arrays[f"d{d}.value"] = _min_uint(value[k] - PAD)
        arrays[f"d{d}.label"] = _min_uint(classes[label[k]])
        arrays[f"d{d}.majority"] = _min_uint(best[k])
        arrays[f"d{d}.total"] = _min_uint(total[k])
        if d < len(levels):
            child_parent = levels[d][0][keep[d]]  # parents (unpruned ids at depth d) of kept children
            arrays[f"d{d}.children"] = _min_uint(np.bincount(child_parent, minlength=len(k))[k])
    return arrays


def _tail(context: Sequence[int], w: int) -> list[int]:
    """The last w tokens as Python ints, left-padded with PAD."""
    tail = [int(t) for t in context[-w:]] if len(context) else []
    return [PAD] * (w - len(tail)) + tail if len(tail) < w else tail


# ----------------------------------------------------------------------------------------------------------
# file format: preamble | header JSON | pad to 64 | arrays (each 64-aligned); sha256 of the data in the header


def _write_file(path: Path, arrays: dict[str, np.ndarray], meta: dict) -> int:
    """Serialise arrays + meta to path atomically (tmp + os.replace); returns bytes written."""
    specs, offset = [], 0
    for name, a in arrays.items():
        offset = -(-offset // _ALIGN) * _ALIGN
        specs.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape), "offset": offset})
        offset += a.nbytes
    digest = hashlib.sha256()
    for a in arrays.values():
        digest.update(np.ascontiguousarray(a).tobytes())
    header = json.dumps({"meta": meta, "arrays": specs, "data_bytes": offset, "data_sha256": digest.hexdigest()},
                        sort_keys=True).encode()
    data_start = -(-(_PREAMBLE.size + len(header)) // _ALIGN) * _ALIGN
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(header), hashlib.sha256(header).digest()))
            fh.write(header)
            for spec, a in zip(specs, arrays.values()):
                fh.write(b"\0" * (data_start + spec["offset"] - fh.tell()))
                fh.write(np.ascontiguousarray(a).tobytes())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return data_start + offset


def _read_file(path: Path, verify: bool) -> tuple[dict[str, np.ndarray], dict]:
    """Parse and check a file written by _write_file; arrays are read-only memory maps."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            pre = fh.read(_PREAMBLE.size)
            if len(pre) < _PREAMBLE.size:
                raise IBaseError(f"{path}: truncated ({size} bytes); not an instance base")
            magic, version, hlen, hsha = _PREAMBLE.unpack(pre)
            if magic != MAGIC:
                raise IBaseError(f"{path}: not a greenspec instance base (bad magic {magic!r})")
            if version != FORMAT_VERSION:
                raise IBaseError(f"{path}: format version {version}; this greenspec reads version {FORMAT_VERSION}")
            header = fh.read(hlen)
    except OSError as err:
        raise IBaseError(f"{path}: cannot be read ({err.strerror})") from err
    if len(header) != hlen or hashlib.sha256(header).digest() != hsha:
        raise IBaseError(f"{path}: header is truncated or corrupt (checksum mismatch)")
    head = json.loads(header)
    data_start = -(-(_PREAMBLE.size + hlen) // _ALIGN) * _ALIGN
    if size != data_start + head["data_bytes"]:
        raise IBaseError(f"{path}: truncated or padded ({size} bytes, expected {data_start + head['data_bytes']})")
    mm = np.memmap(path, dtype=np.uint8, mode="r", offset=data_start, shape=(head["data_bytes"],)) \
        if head["data_bytes"] else np.zeros(0, dtype=np.uint8)  # a fully pruned tree holds no node
    arrays, digest = {}, hashlib.sha256()
    for spec in head["arrays"]:
        dt = np.dtype(spec["dtype"])
        n = int(np.prod(spec["shape"]))
        raw = mm[spec["offset"]: spec["offset"] + n * dt.itemsize]
        if verify:
            digest.update(raw)
        arrays[spec["name"]] = raw.view(dt).reshape(spec["shape"])
    if verify and digest.hexdigest() != head["data_sha256"]:
        raise IBaseError(f"{path}: data checksum mismatch; the file is corrupt, retrain or copy it again")
    return arrays, head["meta"]


# ----------------------------------------------------------------------------------------------------------
# the reference: TiMBL itself behind the same interface


class TimblIGTree:
    """TiMBL's IGTree (`-a1 +D`) with IGTree's methods; the TimblAPI object is created lazily in each process.

    Only the instance-base path and metadata are pickled, so the object can cross Ray task boundaries.
    Instances go to TiMBL in its column format: context values then the target, PAD written as `_`.
    """

    OPTIONS = "-a1 +D +vs"  # +vs: TiMBL prints nothing on stdout
    WEIGHTING = {"gain_ratio": "-w1", "info_gain": "-w2"}

    def __init__(self, ibase_path, meta: dict, api=None):
        self.path = Path(ibase_path)
        self.meta = meta
        self.window = int(meta["window"])
        self._api = api

    @classmethod
    def fit(cls, contexts, targets, order: str = "gain_ratio", workdir=None, **meta) -> TimblIGTree:
        """Train TiMBL on contexts (n, w) and targets (n,); its instance base is written under `workdir`."""
        import timblapi

        if order not in cls.WEIGHTING:
            raise IBaseError(f"timbl: order={order!r} is not accepted; use one of {tuple(cls.WEIGHTING)}")
        contexts, targets = _check_instances(contexts, targets)
        folder = Path(workdir or tempfile.mkdtemp(prefix="greenspec-timbl-"))
        folder.mkdir(parents=True, exist_ok=True)
        data = folder / "train.inst"
        write_timbl_instances(data, contexts, targets)
        options = f"{cls.OPTIONS} {cls.WEIGHTING[order]}"
        api = timblapi.TimblAPI(options, "greenspec")
        if not api.learn(str(data)):
            raise IBaseError(f"timbl: learning from {data} failed")
        ibase = folder / "timbl.ibase"
        api.writeInstanceBase(str(ibase))
        meta = {**meta, "window": contexts.shape[1], "order_rule": order, "options": options,
                "instances": len(targets)}
        return cls(ibase, meta, api=api)

    def _timbl(self):
        """The TimblAPI of this process, loading the instance base on first use."""
        if self._api is None:
            import timblapi

            api = timblapi.TimblAPI(self.meta.get("options", self.OPTIONS), "greenspec")
            if not api.getInstanceBase(str(self.path)):
                raise IBaseError(f"{self.path}: TiMBL cannot read this instance base; retrain it")
            self._api = api
        return self._api

    @property
    def n_nodes(self) -> int:
        """Nodes of TiMBL's pruned tree, the root excluded (each written as `<value>(` in its file)."""
        return len(re.findall(rb"\d+\(", self.path.read_bytes()))

    def __getstate__(self) -> dict:
        """Pickle the path and metadata only: TimblAPI objects cannot be pickled."""
        return {"path": str(self.path), "meta": self.meta}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["meta"])

    def predict(self, context: Sequence[int]) -> int:
        """TiMBL's prediction for the last `window` tokens of context (left-padded with PAD if short)."""
        ok, label = self._timbl().classify(_timbl_line(_tail(context, self.window), "?"))
        if not ok:
            raise IBaseError(f"{self.path}: TiMBL failed to classify context {list(context)[-self.window:]}")
        return int(label)

    def lookup(self, context: Sequence[int]) -> tuple[int, None]:
        """(prediction, None): TiMBL's Python API does not expose the depth of the match."""
        return self.predict(context), None

    def predict_batch(self, contexts) -> np.ndarray:
        """Predictions for contexts (B, window); (B,) int64, one TiMBL call each."""
        return np.array([self.predict(c) for c in np.asarray(contexts).tolist()], dtype=np.int64)

    def save(self, path) -> int:
        """Write TiMBL's instance base to `path` and the metadata to `path`.meta.json; returns bytes."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        self._timbl().writeInstanceBase(str(tmp))  # TiMBL also writes <file>.wgt beside it
        for suffix in ("", ".wgt"):
            if Path(f"{tmp}{suffix}").exists():
                os.replace(f"{tmp}{suffix}", f"{path}{suffix}")
        _atomic_write_text(path.with_name(path.name + ".meta.json"), json.dumps(self.meta, sort_keys=True))
        return path.stat().st_size

    @classmethod
    def load(cls, path, *, tokenizer_id: str | None = None, window: int | None = None) -> TimblIGTree:
        """A TiMBL instance base saved by `save`; refuse one for another tokenizer/window."""
        path = Path(path)
        try:
            meta = json.loads(path.with_name(path.name + ".meta.json").read_text())
        except (OSError, ValueError) as err:
            raise IBaseError(f"{path}: missing or unreadable .meta.json next to the TiMBL instance base") from err
        if not path.is_file():
            raise IBaseError(f"{path}: no such TiMBL instance base")
        if tokenizer_id is not None and meta.get("tokenizer_id") != tokenizer_id:
            raise IBaseError(f"{path}: built for tokenizer {meta.get('tokenizer_id')!r}, not {tokenizer_id!r}; retrain it")
        if window is not None and int(meta["window"]) != int(window):
            raise IBaseError(f"{path}: built for window {meta['window']}, not {window}; retrain it")
        return cls(path, meta)


def _timbl_line(values: Sequence[int], target: str) -> str:
    """One instance in TiMBL's column format."""
    return " ".join("_" if v == PAD else str(v) for v in values) + " " + target


def write_timbl_instances(path, contexts: np.ndarray, targets: np.ndarray, batch: int = 100_000) -> None:
    """Write instances as TiMBL columns (space-separated, target last, PAD as `_`), in batches."""
    with open(path, "w") as fh:
        for lo in range(0, len(targets), batch):
            rows = contexts[lo: lo + batch].tolist()
            ys = targets[lo: lo + batch].tolist()
            fh.write("".join(_timbl_line(r, str(y)) + "\n" for r, y in zip(rows, ys)))


def _atomic_write_text(path: Path, text: str) -> None:
    """Write text via a temp file and os.replace."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
