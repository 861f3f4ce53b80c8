"""The calls of the out-of-core build (`workers.igtree.partitioned`), each independent and run as one task:
scanning a token range, spilling its rows into bucket files, counting a bucket's pairs, building a partition,
and splitting a hot value's bucket. Each call reads and writes only files in the folders it is given.

Rows are compact: (n, w+1) of uint16 when ids fit (else uint32), contexts shifted by 1 so that PAD is 0, the
target last. A bucket is every `b<bucket>.<tag>.rows` file in a folder (one per token range that spilled to it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from workers.igtree.build import (
    array_names,
    build_piece,
    class_priority,
    count_hist,
    min_uint_dtype,
    top_arrays,
    top_of_counts,
)
from workers.igtree.instances import TokenFile, instance_offset, make_instances

INT64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Scan:
    """Stage 1's statistics over a token range: class counts, each class's first appearance as a class (training
    order index; INT64_MAX if absent), and per position the counts of each value (w, n_values)."""

    class_counts: np.ndarray
    class_first: np.ndarray
    value_counts: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by name, as saved to `scan.npz`."""
        return {"class_counts": self.class_counts, "class_first": self.class_first, "value_counts": self.value_counts}


@dataclass(frozen=True)
class Piece:
    """A built partition (or sub-partition): its bucket and its nodes before and after pruning."""

    bucket: int
    nodes_before: int
    nodes_after: int


@dataclass(frozen=True)
class HotCounts:
    """A hot value's rows counted in one pass: the counts of each value at the split column, and of each class by
    priority rank."""

    values: np.ndarray
    ranks: np.ndarray


@dataclass(frozen=True)
class ClassTable:
    """The global class priority: class ids by priority (count, then first appearance) and id -> rank."""

    classes: np.ndarray
    prio_lut: np.ndarray

    @classmethod
    def of(cls, scan: Scan) -> ClassTable:
        """The priority of every class that occurs in `scan`."""
        ids = np.flatnonzero(scan.class_counts)
        classes = ids[class_priority(scan.class_counts[ids], scan.class_first[ids])].astype(np.int64)
        prio_lut = np.zeros(len(scan.class_counts), dtype=min_uint_dtype(len(classes)))
        prio_lut[classes] = np.arange(len(classes))
        return cls(classes, prio_lut)


def compact_dtype(vocab: int) -> np.dtype:
    """Row dtype: uint16 when every id + 1 fits (PAD is stored as 0, contexts shifted by 1), else uint32."""
    return np.dtype(np.uint16) if vocab <= 65535 else np.dtype(np.uint32)


def compact_rows(
    tokens: np.ndarray, offsets: np.ndarray, window: int, lo: int, hi: int, dtype: np.dtype
) -> tuple[np.ndarray, int]:
    """Instances with targets in [lo, hi) as rows (n, w+1): contexts + 1 (PAD -> 0), then the target; and the
    index of the first one in training order."""
    contexts, targets = make_instances(tokens, offsets, window, lo, hi)
    rows = np.empty((len(targets), window + 1), dtype=dtype)
    rows[:, :window] = contexts + 1
    rows[:, window] = targets
    return rows, instance_offset(offsets, lo)


def chunks(lo: int, hi: int, chunk: int) -> list[tuple[int, int]]:
    """[lo, hi) cut into consecutive ranges of at most `chunk`."""
    return [(a, min(hi, a + chunk)) for a in range(lo, hi, chunk)]


def grow_add(acc: np.ndarray, new: np.ndarray) -> np.ndarray:
    """acc + new along the last axis, padding the shorter with zeros."""
    n = max(acc.shape[-1], new.shape[-1])

    def pad(a: np.ndarray) -> np.ndarray:
        return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, n - a.shape[-1])])

    return pad(acc) + pad(new)


def _min_first(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise minimum of two first-appearance arrays, the shorter padded with 'absent'."""
    n = max(len(a), len(b))
    return np.minimum(
        np.pad(a, (0, n - len(a)), constant_values=INT64_MAX), np.pad(b, (0, n - len(b)), constant_values=INT64_MAX)
    )


def scan_range(tokens: np.ndarray, offsets: np.ndarray, window: int, lo: int, hi: int, chunk_tokens: int) -> Scan:
    """Class counts, first appearance (training-order index) and per-position value counts over [lo, hi)."""
    class_counts = np.zeros(0, dtype=np.int64)
    class_first = np.zeros(0, dtype=np.int64)
    value_counts = np.zeros((window, 0), dtype=np.int64)
    for a, b in chunks(lo, hi, chunk_tokens):
        rows, base = compact_rows(tokens, offsets, window, a, b, np.dtype(np.uint32))
        if not len(rows):
            continue
        targets = rows[:, window]
        seen, first_index = np.unique(targets, return_index=True)
        first = np.full(int(seen[-1]) + 1, INT64_MAX, dtype=np.int64)
        first[seen] = first_index + base
        class_first = _min_first(class_first, first)
        class_counts = grow_add(class_counts, np.bincount(targets))
        n_values = int(rows[:, :window].max()) + 1
        value_counts = grow_add(
            value_counts, np.stack([np.bincount(rows[:, j], minlength=n_values) for j in range(window)])
        )
    return Scan(class_counts, class_first, value_counts)


def scan_token_range(tf: TokenFile, window: int, lo: int, hi: int, chunk_tokens: int) -> Scan:
    """`scan_range` of a TokenFile (memory-mapped where the call runs)."""
    return scan_range(tf.tokens(), tf.offsets(), window, lo, hi, chunk_tokens)


def merge_scans(scans: Sequence[Scan]) -> Scan:
    """Sum scan results of consecutive ranges (first appearances: the minimum)."""
    class_counts, class_first, value_counts = np.zeros(0, np.int64), np.zeros(0, np.int64), None
    for s in scans:
        class_counts = grow_add(class_counts, s.class_counts)
        class_first = _min_first(class_first, s.class_first)
        value_counts = s.value_counts if value_counts is None else grow_add(value_counts, s.value_counts)
    return Scan(class_counts, class_first, value_counts)


# ---------------------------------------------------------------------------------------------- spilling


@dataclass(frozen=True)
class Buckets:
    """Where a spill puts rows: by their value at `column`, in the id ranges `bounds` (one bucket each), as `dtype`
    rows, into the files `<folder>/b<bucket>.<tag>.rows`."""

    column: int
    bounds: Sequence[tuple[int, int]]
    dtype: str
    folder: str
    tag: str


def spill_range(
    tokens: np.ndarray, offsets: np.ndarray, window: int, lo: int, hi: int, chunk_tokens: int, buckets: Buckets
) -> int:
    """Append the rows of [lo, hi) to one file per bucket (rows whose value at `buckets.column` lies in its bounds);
    returns rows.

    Files are `<folder>/b<bucket>.<tag>.rows`, written under a .tmp name and renamed when the range is done.
    """
    out, tag, bounds = Path(buckets.folder), buckets.tag, buckets.bounds
    out.mkdir(parents=True, exist_ok=True)
    edges = np.array([b[0] for b in bounds] + [bounds[-1][1]], dtype=np.int64)
    handles: dict[int, BinaryIO] = {}
    n_rows = 0
    try:
        for a, b in chunks(lo, hi, chunk_tokens):
            rows, _ = compact_rows(tokens, offsets, window, a, b, np.dtype(buckets.dtype))
            bucket = np.searchsorted(edges, rows[:, buckets.column], side="right") - 1
            by_bucket = np.argsort(bucket, kind="stable")
            append_by_bucket(rows[by_bucket], bucket[by_bucket], handles, lambda k: out / f"b{k:06d}.{tag}.rows.tmp")
            n_rows += len(rows)
    finally:
        for fh in handles.values():
            fh.close()
    for k in handles:
        os.replace(out / f"b{k:06d}.{tag}.rows.tmp", out / f"b{k:06d}.{tag}.rows")
    return n_rows


def spill_token_range(tf: TokenFile, **kwargs) -> int:
    """`spill_range` of a TokenFile."""
    return spill_range(tf.tokens(), tf.offsets(), **kwargs)


def append_by_bucket(rows: np.ndarray, bucket: np.ndarray, handles: dict[int, BinaryIO], path_of) -> None:
    """Append rows (sorted by bucket) to one file per bucket, opened at `path_of(bucket)` on first use."""
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]]) if len(bucket) else []
    for s, e in zip(starts, list(starts[1:]) + [len(bucket)]):
        k = int(bucket[s])
        if k not in handles:
            handles[k] = open(path_of(k), "wb")
        handles[k].write(rows[s:e].tobytes())


def load_bucket(folder: str, bucket: int, window: int, dtype: str) -> np.ndarray:
    """All rows spilled to one bucket (every range's file), (m, w+1)."""
    files = sorted(Path(folder).glob(f"b{bucket:06d}.*.rows"))
    parts = [np.fromfile(f, dtype=dtype).reshape(-1, window + 1) for f in files]
    return np.concatenate(parts) if len(parts) > 1 else (parts[0] if parts else np.zeros((0, window + 1), dtype))


def iter_bucket(folder: str, bucket: int, window: int, dtype: str, chunk_rows: int) -> Iterator[np.ndarray]:
    """A bucket's rows, (m, w+1) chunks of at most `chunk_rows` (memory-mapped, one chunk copied at a time)."""
    for f in sorted(Path(folder).glob(f"b{bucket:06d}.*.rows")):
        if f.stat().st_size:
            rows = np.memmap(f, dtype=dtype, mode="r").reshape(-1, window + 1)
            for a in range(0, len(rows), chunk_rows):
                yield np.array(rows[a : a + chunk_rows])


# ---------------------------------------------------------------------------------------------- per-bucket work


def bucket_pair_hists(
    folder: str, bucket: int, lo: int, hi: int, window: int, dtype: str, n_values: int, table_entries: int
) -> list[list[list[int]]]:
    """Per position, the count-of-counts of (value, class) pairs over one class bucket's rows ([lo, hi) classes)."""
    rows = load_bucket(folder, bucket, window, dtype)
    class_ids = rows[:, window].astype(np.int64) - lo
    hists = []
    for j in range(window):
        keys = class_ids * n_values + rows[:, j]
        if (hi - lo) * n_values <= min(table_entries, 2 * len(rows)):  # a dense table: one bincount, no sort
            counts = np.bincount(keys, minlength=(hi - lo) * n_values)
        else:
            counts = np.unique(keys, return_counts=True)[1]
        hists.append(count_hist(counts).tolist())
    return hists


def build_partition(
    folder: str,
    bucket: int,
    window: int,
    dtype: str,
    positions: list[int],
    table: ClassTable,
    out: str,
    parent_label: int | None = None,
) -> Piece:
    """Build one partition's piece of the tree and save it atomically to `out` (.npz).

    With `parent_label` (a priority rank) the rows all share one depth-1 value (a hot value's sub-partition):
    the piece is that node's subtree from depth 2 on, pruned against its label, stored under depths 2..w.
    """
    rows = load_bucket(folder, bucket, window, dtype)
    classes = table.classes
    cols = positions if parent_label is None else positions[1:]
    xdt = min_uint_dtype(max(int(rows[:, :window].max(initial=0)), len(classes)))
    x = np.empty((len(rows), len(cols) + 1), dtype=xdt)
    x[:, : len(cols)] = rows[:, cols]
    x[:, len(cols)] = table.prio_lut[rows[:, window]]
    del rows
    if parent_label is None:
        arrays, before, after = build_piece(x, None, classes)
    else:
        sub, before, after = build_piece(x, None, classes, root_label=parent_label)
        arrays = {n: np.zeros(0, np.int64) for n in array_names(window)}
        arrays.update({f"d{int(n[1:].split('.')[0]) + 1}.{n.split('.')[1]}": a for n, a in sub.items()})
    del x
    save_piece(out, arrays, before, after)
    return Piece(bucket, before, after)


def save_piece(out: str, arrays: dict[str, np.ndarray], before: int, after: int) -> None:
    """A built piece, saved atomically (tmp + rename)."""
    tmp = f"{out}.tmp.npz"
    np.savez(tmp, before=before, after=after, **arrays)
    os.replace(tmp, out)


# ---------------------------------------------------------------------------------------------- hot values


def hot_counts(
    folder: str, bucket: int, window: int, dtype: str, column: int, prio_lut: np.ndarray, chunk_rows: int
) -> HotCounts:
    """One streaming pass over a hot value's bucket: its rows' value counts at `column` and class counts by rank."""
    values, ranks = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for rows in iter_bucket(folder, bucket, window, dtype, chunk_rows):
        values = grow_add(values, np.bincount(rows[:, column]))
        ranks = grow_add(ranks, np.bincount(prio_lut[rows[:, window]]))
    return HotCounts(values, ranks)


def resplit_bucket(
    folder: str,
    bucket: int,
    window: int,
    dtype: str,
    column: int,
    bounds: Sequence[tuple[int, int]],
    out_folder: str,
    chunk_rows: int,
) -> int:
    """Spill a hot bucket's rows into sub-buckets by `column` (files `b<k>.s.rows` in `out_folder`, written
    in a .tmp folder renamed when done); returns rows."""
    tmp = Path(f"{out_folder}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    edges = np.array([b[0] for b in bounds] + [bounds[-1][1]], dtype=np.int64)
    handles: dict[int, BinaryIO] = {}
    n_rows = 0
    try:
        for rows in iter_bucket(folder, bucket, window, dtype, chunk_rows):
            sub = np.searchsorted(edges, rows[:, column], side="right") - 1
            by_sub = np.argsort(sub, kind="stable")
            append_by_bucket(rows[by_sub], sub[by_sub], handles, lambda k: tmp / f"b{k:06d}.s.rows")
            n_rows += len(rows)
    finally:
        for fh in handles.values():
            fh.close()
    shutil.rmtree(out_folder, ignore_errors=True)
    os.replace(tmp, out_folder)
    return n_rows


def hot_head(value: int, ranks: np.ndarray, classes: np.ndarray, subs: Sequence[str], window: int, out: str) -> None:
    """Save a hot value's depth-1 node (label, majority, total over all its rows; children: its sub-partitions'
    kept depth-2 nodes) as a piece with empty deeper depths; pruned like any depth-1 node."""
    children = 0
    for sub in subs:
        with np.load(sub) as z:
            children += len(z["d2.value"])
    label = int(np.argmax(ranks))  # the first of the most frequent: the highest-priority class among ties
    kept = children > 0 or label != 0
    arrays = {n: np.zeros(0, np.int64) for n in array_names(window)}
    if kept:
        arrays.update(
            {
                "d1.value": np.array([value]),
                "d1.label": np.array([int(classes[label])]),
                "d1.majority": np.array([int(ranks.max())]),
                "d1.total": np.array([int(ranks.sum())]),
                "d1.children": np.array([children]),
                **top_arrays(1, *top_of_counts(ranks), classes),
            }
        )
    save_piece(out, {k: v.astype(np.int64) for k, v in arrays.items()}, 1, int(kept))
