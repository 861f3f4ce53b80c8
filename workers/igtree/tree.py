"""The IGTree engine: training from counted rows, lookup (single and batched), save/load.

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

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workers.errors import IBaseError
from workers.igtree.build import (
    build_piece,
    check_order,
    class_priority,
    feature_order,
    feature_weights,
    min_uint,
    tree_meta,
)
from workers.igtree.counting import PAD, InstanceCounts, count_instances
from workers.igtree.fileformat import read_file, write_file

logger = logging.getLogger(__name__)


class IGTree:
    """A pruned IGTree over windows of `window` token ids; per node: label, majority count, total count, and its
    top classes with their counts.

    Storage per depth d (1..window), nodes in (parent, value) order: `value` (token id - PAD), `label`,
    `majority`, `total`, for d < window `children` (kept children per node), and the runner-up classes after
    the label (up to TOP_CLASSES - 1 per node, sparse: `alt_n` per node, `alt_label`/`alt_count` flat). The root
    lives in `meta`.
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
        self._shares: list[float] | None = None
        self._tops: tuple | None = None

    # -- training ------------------------------------------------------------------------------------------

    @classmethod
    def fit(cls, contexts, targets, order: str | Sequence[int] = "gain_ratio", **meta) -> IGTree:
        """Train on contexts (n, w) int and targets (n,) int; `order`: gain_ratio, info_gain or positions."""
        return cls.from_counts(count_instances(contexts, targets, dedup=False), order=order, **meta)

    @classmethod
    def from_counts(cls, counts: InstanceCounts, order: str | Sequence[int] = "gain_ratio", **meta) -> IGTree:
        """Build the pruned tree from (merged) instance counts: the whole tree as one piece."""
        by_prio = class_priority(counts.class_counts, counts.class_first)
        prio = np.empty(len(by_prio), dtype=np.int64)
        prio[by_prio] = np.arange(len(by_prio))
        row_cls = _row_classes(counts, prio)
        positions = check_order(order, counts.window)
        weights = np.zeros(counts.window) if positions is not None else feature_weights(counts, row_cls, order)
        positions = positions if positions is not None else feature_order(weights)
        x = np.concatenate([counts.rows[:, positions] - PAD, row_cls[:, None]], axis=1)
        unit = bool(counts.counts.max() == 1)
        arrays, before, after = build_piece(x, None if unit else counts.counts, counts.class_ids[by_prio])
        del x
        meta = tree_meta(
            meta,
            positions=positions,
            order=order,
            weights=weights,
            n_instances=counts.n_instances,
            classes=counts.class_ids[by_prio],
            class_counts_by_prio=counts.class_counts[by_prio],
            nodes=(before, after),
        )
        logger.info("igtree: %d instances, order %s, %d -> %d nodes", counts.n_instances, positions, before, after)
        return cls({name: min_uint(a) for name, a in arrays.items()}, meta)

    # -- queries -------------------------------------------------------------------------------------------

    def lookup(self, context: Sequence[int]) -> tuple[int, int]:
        """(label of the deepest matching node, its depth: 0 = root) for the last `window` tokens of context."""
        node, depth = self._walk(context)
        return self._labels[node], depth

    def lookup_scored(self, context: Sequence[int]) -> tuple[int, int, float]:
        """(label, depth, majority share) of the deepest matching node; the share is the fraction of that node's
        training instances whose next token is its label (an estimate of how often the guess is right)."""
        node, depth = self._walk(context)
        if self._shares is None:
            parts = [np.array([self.meta["root"]["majority"] / max(1, self.meta["root"]["total"])])]
            parts += [
                self.arrays[f"d{d}.majority"] / np.maximum(1, self.arrays[f"d{d}.total"].astype(np.float64))
                for d in range(1, self.window + 1)
            ]
            self._shares = np.concatenate(parts).tolist()
        return self._labels[node], depth, self._shares[node]

    def lookup_top(self, context: Sequence[int]) -> tuple[list[tuple[int, int]], int, int]:
        """(the deepest matching node's top classes as (token, count), the label first; its total count; depth).

        A file written before nodes kept their runner-up classes gives the label with its majority count only.
        """
        node, depth = self._walk(context)
        self._single_index()
        return (*self._node_top(node), depth)

    def lookup_path(self, context: Sequence[int]) -> list[tuple[list[tuple[int, int]], int]]:
        """(top classes as (token, count), total) of every stored node the context matches, root first: the
        distributions a backoff mixes (the deepest node alone is `lookup_top`)."""
        index, _ = self._single_index()
        tail = context_tail(context, self.window)
        nodes, node = [0], 0
        for pos in self.order:
            child = index.get((node << 32) | (tail[pos] - PAD))
            if child is None:
                break
            node = child
            nodes.append(node)
        return [self._node_top(n) for n in nodes]

    def _node_top(self, node: int) -> tuple[list[tuple[int, int]], int]:
        """(top classes as (token, count), total) of one node by global id (0: the root)."""
        if node == 0:
            root = self.meta["root"]
            pairs = root.get("top") or [[root["label"], root["majority"]]]
            return [(int(t), int(c)) for t, c in pairs], int(root["total"])
        majority, total, ends, alt, alt_count = self._top_table()
        top = [(self._labels[node], int(majority[node - 1]))]
        if ends is not None:
            start = int(ends[node - 2]) if node > 1 else 0
            top += list(zip(alt[start : ends[node - 1]].tolist(), alt_count[start : ends[node - 1]].tolist()))
        return top, int(total[node - 1])

    def _top_table(self) -> tuple:
        """Over non-root nodes in global order: majority, total, end offsets into the runner-up arrays, their tokens
        and counts (None for the last three in a file without them); concatenated once, numpy."""
        if self._tops is None:
            a, depths = self.arrays, range(1, self.window + 1)
            majority = np.concatenate([a[f"d{d}.majority"].astype(np.int64) for d in depths])
            total = np.concatenate([a[f"d{d}.total"].astype(np.int64) for d in depths])
            if "d1.alt_n" not in a:
                self._tops = (majority, total, None, None, None)
            else:
                ends = np.cumsum(np.concatenate([a[f"d{d}.alt_n"].astype(np.int64) for d in depths]))
                alt = np.concatenate([a[f"d{d}.alt_label"].astype(np.int64) for d in depths])
                alt_count = np.concatenate([a[f"d{d}.alt_count"].astype(np.int64) for d in depths])
                self._tops = (majority, total, ends, alt, alt_count)
        return self._tops

    def _walk(self, context: Sequence[int]) -> tuple[int, int]:
        """(global id of the deepest node matching the last `window` tokens, its depth)."""
        index, _ = self._single_index()
        tail = context_tail(context, self.window)
        node, depth = 0, 0
        for pos in self.order:
            child = index.get((node << 32) | (tail[pos] - PAD))
            if child is None:
                break
            node, depth = child, depth + 1
        return node, depth

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
        return write_file(Path(path), self.arrays, self.meta)

    @classmethod
    def load(cls, path, *, tokenizer_id: str | None = None, window: int | None = None, verify: bool = True) -> IGTree:
        """Memory-map a saved tree; refuse a truncated/corrupt file or one for another tokenizer/window."""
        arrays, meta = read_file(Path(path), verify=verify)
        if tokenizer_id is not None and meta.get("tokenizer_id") != tokenizer_id:
            raise IBaseError(
                f"{path}: built for tokenizer {meta.get('tokenizer_id')!r}, not {tokenizer_id!r}; retrain it"
            )
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


def context_tail(context: Sequence[int], w: int) -> list[int]:
    """The last w tokens as Python ints, left-padded with PAD."""
    tail = [int(t) for t in context[-w:]] if len(context) else []
    return [PAD] * (w - len(tail)) + tail if len(tail) < w else tail
