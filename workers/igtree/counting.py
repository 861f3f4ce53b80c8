"""Instances reduced to counted rows, per shard, and merged in training order; the row-sorting helpers.

`count_instances` reduces a shard of instances to (row, count) tables plus class statistics; `merge_counts`
concatenates shards in training order. Every quantity the build uses is an integer sum over those tables, so
N shards give a bit-identical tree to one piece.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.errors import IBaseError

PAD = -1  # left padding of contexts shorter than the window (document starts); never a token id


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
    contexts, targets = check_instances(contexts, targets)
    rows = np.concatenate([contexts, targets[:, None]], axis=1)
    counts = np.ones(len(rows), dtype=np.int64)
    if dedup:
        rows, counts = dedup_rows(rows)
    class_ids, first, class_counts = np.unique(targets, return_index=True, return_counts=True)
    return InstanceCounts(
        rows=rows,
        counts=counts.astype(np.int64),
        class_ids=class_ids.astype(np.int64),
        class_counts=class_counts.astype(np.int64),
        class_first=first.astype(np.int64) + int(offset),
        n_instances=len(targets),
    )


def dedup_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (sorted) and how often each occurs; (m', w+1) and (m',) int64."""
    rows = rows[sort_rows(rows)]
    starts = run_starts(rows)
    return rows[starts], np.diff(np.append(starts, len(rows))).astype(np.int64)


def merge_counts(parts: Sequence[InstanceCounts]) -> InstanceCounts:
    """Merge shard counts (each counted with its global `offset`) into one table; rows may repeat."""
    if not parts:
        raise IBaseError("merge_counts: no shards given; pass at least one InstanceCounts")
    if len({p.window for p in parts}) != 1:
        raise IBaseError(f"merge_counts: shards disagree on the window ({sorted({p.window for p in parts})})")
    class_ids, class_counts, class_first = merge_class_stats(
        [(p.class_ids, p.class_counts, p.class_first) for p in parts]
    )
    return InstanceCounts(
        rows=np.concatenate([p.rows for p in parts]),
        counts=np.concatenate([p.counts for p in parts]),
        class_ids=class_ids,
        class_counts=class_counts,
        class_first=class_first,
        n_instances=sum(p.n_instances for p in parts),
    )


def merge_class_stats(parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]):
    """Merge (class ids, counts, first appearance) triples: counts add, first appearances take the minimum."""
    ids = np.concatenate([p[0] for p in parts])
    class_ids, inverse = np.unique(ids, return_inverse=True)
    class_counts = np.zeros(len(class_ids), dtype=np.int64)
    np.add.at(class_counts, inverse, np.concatenate([p[1] for p in parts]).astype(np.int64))
    class_first = np.full(len(class_ids), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(class_first, inverse, np.concatenate([p[2] for p in parts]).astype(np.int64))
    return class_ids.astype(np.int64), class_counts, class_first


def check_instances(contexts, targets) -> tuple[np.ndarray, np.ndarray]:
    """Validate shapes and values; return int64 copies-or-views."""
    contexts = np.asarray(contexts)
    targets = np.asarray(targets)
    if contexts.ndim != 2 or targets.ndim != 1 or len(contexts) != len(targets):
        raise IBaseError(
            f"instances: contexts must be (n, w) and targets (n,); got {contexts.shape} and {targets.shape}"
        )
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


def pack_words(cols: Sequence[np.ndarray]) -> list[np.ndarray]:
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


def sort_rows(rows: np.ndarray, shift: int = -PAD) -> np.ndarray:
    """Indices that sort rows lexicographically (columns shifted by `shift` to be >= 0, first most significant)."""
    cols = [rows[:, j].astype(np.int64) + shift for j in range(rows.shape[1])]
    if max(int(col.max()) for col in cols) < 2**16:  # numpy radix-sorts 16-bit keys: one O(n) pass per column
        return np.lexsort([col.astype(np.uint16) for col in cols[::-1]])
    words = pack_words(cols)
    if len(words) == 1:
        return np.argsort(words[0], kind="stable")
    return np.lexsort(words[::-1])


def run_starts(rows: np.ndarray) -> np.ndarray:
    """Start indices of runs of equal rows in sorted rows."""
    change = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        change[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    return np.flatnonzero(change)


def weighted_unique(keys: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and the summed weights (or occurrence counts) of each."""
    if weights is None:
        uk, n = np.unique(keys, return_counts=True)
        return uk, n.astype(np.int64)
    o = np.argsort(keys, kind="stable")
    ks = keys[o]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    return ks[starts], np.add.reduceat(weights[o], starts)
