"""The out-of-core build: a token file -> the identical .igtree in bounded memory, partition by partition.

Stages, each resumable (results written as tmp + rename; a stage whose file exists is never redone):

1. *scan*: one streaming pass over the token file for the class statistics (counts, first appearance as a
   class in training order) and each position's value counts; dense arrays of the vocabulary's size.
2. *stats*: the instances are spilled to disk as compact rows (uint16 when ids fit, PAD stored as 0, target
   last), bucketed by class id; each bucket holds every (value, class) pair of its classes, so the pairs'
   count-of-counts histograms add up exactly over buckets. They fix the feature weights and order.
3. *spill*: the instances are spilled again, bucketed by their value at the most informative position
   (contiguous value ranges sized to the memory budget: the partitions).
4. *build*: each partition is built into its piece of the tree (`build.build_piece`, the in-memory path's
   own code) with the global class priority, and saved. A partition too big for one task is a single *hot*
   value (one value is indivisible at depth 1): its rows are split again by the value at the second position
   of the feature order, each sub-partition built into its part of that value's subtree (pruned against the
   value's label), and the value's own node (label, counts over all its rows) saved as a head piece.
5. *join*: pieces are concatenated per depth in value order and written by the streaming file writer.

Stages 1, 3 and 4 are lists of independent calls handed to a `TaskMap` (run here one by one, or as parallel
Ray tasks by `workers.trainer`), each declaring the memory it needs. The result equals `IGTree.fit` on the
same instances byte for byte.

Example:
    >>> plan = plan_training(n_instances, budget_bytes=2 << 30, workers=2)
    >>> path = build_partitioned(tf, 4, "gain_ratio", work_dir, out_path, meta, plan)
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workers.errors import IBaseError
from workers.igtree.build import (
    array_names,
    build_piece,
    check_order,
    class_priority,
    count_hist,
    feature_order,
    merge_hists,
    min_uint_dtype,
    top_arrays,
    top_of_counts,
    tree_meta,
    weights_from_hists,
)
from workers.igtree.fileformat import Column, write_columns

logger = logging.getLogger(__name__)

# Peak numpy allocations per unit (tracemalloc) measured on 1M tokens of real text (Mistral tokenizer), rounded
# up by ~10%: building a partition 138 B/row, a class bucket's pair counts 45, windowing and bucketing a chunk of
# the token file 89 B/token, `IGTree.fit` on int32 instances 275 B/row instances included. See BENCHMARKS.md.
BUILD_BYTES_PER_ROW = 150
STATS_BYTES_PER_ROW = 50
CHUNK_BYTES_PER_TOKEN = 100
IN_MEMORY_BYTES_PER_ROW = 300
MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS = 1 << 12, 1 << 22
TABLE_BYTES = 8  # a dense pair-count table entry (int64)

Progress = Callable[[str, int, int], None]  # (stage, done, total)
# (function, keyword arguments per call, memory bytes: one for all or one per call, on_done=None, budget_bytes=None)
TaskMap = Callable[..., list]


def local_map(fn: Callable, calls: list[dict], memory_bytes, on_done: Callable[[int], None] | None = None,
              budget_bytes: int | None = None) -> list:
    """Run the calls here, one after the other (memory is only declared); on_done(n done) after each."""
    out = []
    for i, kwargs in enumerate(calls):
        out.append(fn(**kwargs))
        if on_done:
            on_done(i + 1)
    return out


# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Plan:
    """How a training fits its budget: per-task bytes, chunk size, partition and bucket row caps."""

    budget_bytes: int
    workers: int
    task_bytes: int
    chunk_tokens: int
    build_rows: int
    stats_rows: int

    @property
    def in_memory_rows(self) -> int:
        """Instances the in-memory path can take within the whole budget."""
        return self.budget_bytes // IN_MEMORY_BYTES_PER_ROW


def plan_training(budget_bytes: int, workers: int = 1) -> Plan:
    """Split a budget over `workers` concurrent tasks; refuse one too small for even the smallest chunk."""
    workers = max(1, int(workers))
    task = int(budget_bytes) // workers
    need = MIN_CHUNK_TOKENS * CHUNK_BYTES_PER_TOKEN * workers
    if budget_bytes < need:
        raise IBaseError(f"memory budget {_gb(budget_bytes)} is too small; the smallest that works is {_gb(need)}")
    chunk = int(min(MAX_CHUNK_TOKENS, max(MIN_CHUNK_TOKENS, task // (4 * CHUNK_BYTES_PER_TOKEN))))
    return Plan(budget_bytes=int(budget_bytes), workers=workers, task_bytes=task, chunk_tokens=chunk,
                build_rows=task // BUILD_BYTES_PER_ROW, stats_rows=task // STATS_BYTES_PER_ROW)


def _gb(n_bytes: float) -> str:
    """Bytes as a memory_gb value, rounded up to 3 significant digits (so the value shown is enough)."""
    gb = max(n_bytes, 1) / 1e9
    step = 10.0 ** (math.floor(math.log10(gb)) - 2)
    return f"{math.ceil(gb / step - 1e-9) * step:.{max(0, 2 - math.floor(math.log10(gb)))}f} GB"


def group_consecutive(counts: np.ndarray, cap: int) -> list[tuple[int, int]]:
    """Consecutive [lo, hi) id ranges over the ids with count > 0, each summing to at most `cap` (one id may exceed it)."""
    ids = np.flatnonzero(counts)
    groups, lo, total, prev = [], None, 0, -1
    for i in ids.tolist():
        c = int(counts[i])
        if lo is not None and total + c > cap:
            groups.append((lo, prev + 1))
            lo = None
        if lo is None:
            lo, total = i, 0
        total, prev = total + c, i
    if lo is not None:
        groups.append((lo, prev + 1))
    return groups


def task_bytes(rows: int, bytes_per_row: int) -> int:
    """The memory one call over `rows` rows declares: its rows' share plus 1 MB of small working arrays."""
    return int(rows) * bytes_per_row + (1 << 20)


def check_fits(largest_rows: int, bytes_per_row: int, plan: Plan, what: str) -> None:
    """Refuse a budget in which the largest indivisible group (one class, one value) cannot be processed.

    Such a group may take the whole budget: calls are admitted while their declared memory fits it, so a big one
    runs alone. The smallest budget that works is the one that holds it.
    """
    need = task_bytes(largest_rows, bytes_per_row)
    if need > plan.budget_bytes:
        raise IBaseError(f"memory budget {_gb(plan.budget_bytes)} is too small for {what} ({largest_rows:,} "
                         f"instances); the smallest that works is {_gb(need)}")


# ---------------------------------------------------------------------------------------------- instances


def compact_dtype(vocab: int) -> np.dtype:
    """Row dtype: uint16 when every id + 1 fits (PAD is stored as 0, contexts shifted by 1), else uint32."""
    return np.dtype(np.uint16) if vocab <= 65535 else np.dtype(np.uint32)


def compact_rows(tokens, offsets: np.ndarray, window: int, lo: int, hi: int, dtype: np.dtype) -> tuple[np.ndarray, int]:
    """Instances with targets in [lo, hi) as rows (n, w+1): contexts + 1 (PAD -> 0), then the target; and the
    index of the first one in training order."""
    from workers.instances import instance_offset, make_instances

    contexts, targets = make_instances(tokens, offsets, window, lo, hi)
    rows = np.empty((len(targets), window + 1), dtype=dtype)
    rows[:, :window] = contexts + 1
    rows[:, window] = targets
    return rows, instance_offset(offsets, lo)


def _chunks(lo: int, hi: int, chunk: int):
    return [(a, min(hi, a + chunk)) for a in range(lo, hi, chunk)]


def _grow_add(acc: np.ndarray, new: np.ndarray) -> np.ndarray:
    """acc + new along the last axis, padding the shorter with zeros."""
    n = max(acc.shape[-1], new.shape[-1])
    def pad(a: np.ndarray) -> np.ndarray:
        return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, n - a.shape[-1])])

    return pad(acc) + pad(new)


def scan_range(tokens, offsets, window: int, lo: int, hi: int, chunk_tokens: int) -> dict:
    """Class counts, first appearance (training-order index) and per-position value counts over [lo, hi)."""
    cls = np.zeros(0, dtype=np.int64)
    first = np.zeros(0, dtype=np.int64)
    values = np.zeros((window, 0), dtype=np.int64)
    dtype = np.dtype(np.uint32)
    for a, b in _chunks(lo, hi, chunk_tokens):
        rows, base = compact_rows(tokens, offsets, window, a, b, dtype)
        if not len(rows):
            continue
        t = rows[:, window]
        u, idx = np.unique(t, return_index=True)
        f = np.full(int(u[-1]) + 1, np.iinfo(np.int64).max, dtype=np.int64)
        f[u] = idx + base
        first = np.minimum(np.pad(first, (0, max(0, len(f) - len(first))), constant_values=np.iinfo(np.int64).max),
                           np.pad(f, (0, max(0, len(first) - len(f))), constant_values=np.iinfo(np.int64).max))
        cls = _grow_add(cls, np.bincount(t))
        values = _grow_add(values, np.stack([np.bincount(rows[:, j], minlength=int(rows[:, :window].max()) + 1)
                                             for j in range(window)]))
    return {"class_counts": cls, "class_first": first, "value_counts": values}


def merge_scans(scans: Sequence[dict]) -> dict:
    """Sum scan results of consecutive ranges (first appearances: the minimum)."""
    big = np.iinfo(np.int64).max
    cls, first, values = np.zeros(0, np.int64), np.zeros(0, np.int64), None
    for s in scans:
        cls = _grow_add(cls, s["class_counts"])
        n = max(len(first), len(s["class_first"]))
        first = np.minimum(np.pad(first, (0, n - len(first)), constant_values=big),
                           np.pad(s["class_first"], (0, n - len(s["class_first"])), constant_values=big))
        values = s["value_counts"] if values is None else _grow_add(values, s["value_counts"])
    return {"class_counts": cls, "class_first": first, "value_counts": values}


# ---------------------------------------------------------------------------------------------- spilling


def spill_range(tokens, offsets, window: int, lo: int, hi: int, chunk_tokens: int, column: int,
                bounds: Sequence[tuple[int, int]], dtype: str, folder: str, tag: str) -> int:
    """Append the rows of [lo, hi) to one file per bucket (rows whose `column` lies in bounds[b]); returns rows.

    Files are `<folder>/b<bucket>.<tag>.rows`, written under a .tmp name and renamed when the range is done.
    """
    folder_p = Path(folder)
    folder_p.mkdir(parents=True, exist_ok=True)
    edges = np.array([b[0] for b in bounds] + [bounds[-1][1]], dtype=np.int64)
    handles: dict[int, object] = {}
    n = 0
    try:
        for a, b in _chunks(lo, hi, chunk_tokens):
            rows, _ = compact_rows(tokens, offsets, window, a, b, np.dtype(dtype))
            bucket = np.searchsorted(edges, rows[:, column], side="right") - 1
            o = np.argsort(bucket, kind="stable")
            rows, bucket = rows[o], bucket[o]
            _append_by_bucket(rows, bucket, handles, lambda k: folder_p / f"b{k:06d}.{tag}.rows.tmp")
            n += len(rows)
    finally:
        for fh in handles.values():
            fh.close()
    for k in handles:
        os.replace(folder_p / f"b{k:06d}.{tag}.rows.tmp", folder_p / f"b{k:06d}.{tag}.rows")
    return n


def _append_by_bucket(rows: np.ndarray, bucket: np.ndarray, handles: dict, path_of) -> None:
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


# ---------------------------------------------------------------------------------------------- per-bucket work


def bucket_pair_hists(folder: str, bucket: int, lo: int, hi: int, window: int, dtype: str,
                      n_values: int, table_entries: int) -> list[list[list[int]]]:
    """Per position, the count-of-counts of (value, class) pairs over one class bucket's rows ([lo, hi) classes)."""
    rows = load_bucket(folder, bucket, window, dtype)
    cls = rows[:, window].astype(np.int64) - lo
    hists = []
    for j in range(window):
        keys = cls * n_values + rows[:, j]
        if (hi - lo) * n_values <= min(table_entries, 2 * len(rows)):  # a dense table: one bincount, no sort
            counts = np.bincount(keys, minlength=(hi - lo) * n_values)
        else:
            counts = np.unique(keys, return_counts=True)[1]
        hists.append(count_hist(counts).tolist())
    return hists


def build_partition(folder: str, bucket: int, window: int, dtype: str, positions: list[int],
                    prio_lut: np.ndarray, classes: np.ndarray, out: str, parent_label: int | None = None) -> dict:
    """Build one partition's piece of the tree and save it atomically to `out` (.npz); returns its sizes.

    With `parent_label` (a priority rank) the rows all share one depth-1 value (a hot value's sub-partition):
    the piece is that node's subtree from depth 2 on, pruned against its label, stored under depths 2..w.
    """
    rows = load_bucket(folder, bucket, window, dtype)
    cols = positions if parent_label is None else positions[1:]
    xdt = min_uint_dtype(max(int(rows[:, :window].max(initial=0)), len(classes)))
    x = np.empty((len(rows), len(cols) + 1), dtype=xdt)
    x[:, :len(cols)] = rows[:, cols]
    x[:, len(cols)] = prio_lut[rows[:, window]]
    del rows
    if parent_label is None:
        arrays, before, after = build_piece(x, None, classes)
    else:
        sub, before, after = build_piece(x, None, classes, root_label=parent_label)
        arrays = {n: np.zeros(0, np.int64) for n in array_names(window)}
        arrays.update({f"d{int(n[1:].split('.')[0]) + 1}.{n.split('.')[1]}": a for n, a in sub.items()})
    del x
    _save_piece(out, arrays, before, after)
    return {"bucket": bucket, "before": before, "after": after}


def _save_piece(out: str, arrays: dict[str, np.ndarray], before: int, after: int) -> None:
    """A built piece, saved atomically (tmp + rename)."""
    tmp = f"{out}.tmp.npz"
    np.savez(tmp, before=before, after=after, **arrays)
    os.replace(tmp, out)


# ---------------------------------------------------------------------------------------------- hot values


def iter_bucket(folder: str, bucket: int, window: int, dtype: str, chunk_rows: int):
    """A bucket's rows, (m, w+1) chunks of at most `chunk_rows` (memory-mapped, one chunk copied at a time)."""
    for f in sorted(Path(folder).glob(f"b{bucket:06d}.*.rows")):
        if f.stat().st_size:
            rows = np.memmap(f, dtype=dtype, mode="r").reshape(-1, window + 1)
            for a in range(0, len(rows), chunk_rows):
                yield np.array(rows[a:a + chunk_rows])


def hot_counts(folder: str, bucket: int, window: int, dtype: str, column: int, prio_lut: np.ndarray,
               chunk_rows: int) -> dict:
    """One streaming pass over a hot value's bucket: its rows' value counts at `column` and class counts by rank."""
    values, ranks = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for rows in iter_bucket(folder, bucket, window, dtype, chunk_rows):
        values = _grow_add(values, np.bincount(rows[:, column]))
        ranks = _grow_add(ranks, np.bincount(prio_lut[rows[:, window]]))
    return {"values": values, "ranks": ranks}


def resplit_bucket(folder: str, bucket: int, window: int, dtype: str, column: int,
                   bounds: Sequence[tuple[int, int]], out_folder: str, chunk_rows: int) -> int:
    """Spill a hot bucket's rows into sub-buckets by `column` (files `b<k>.s.rows` in `out_folder`, written
    in a .tmp folder renamed when done); returns rows."""
    tmp = Path(f"{out_folder}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    edges = np.array([b[0] for b in bounds] + [bounds[-1][1]], dtype=np.int64)
    handles: dict[int, object] = {}
    n = 0
    try:
        for rows in iter_bucket(folder, bucket, window, dtype, chunk_rows):
            sub = np.searchsorted(edges, rows[:, column], side="right") - 1
            o = np.argsort(sub, kind="stable")
            rows, sub = rows[o], sub[o]
            _append_by_bucket(rows, sub, handles, lambda k: tmp / f"b{k:06d}.s.rows")
            n += len(rows)
    finally:
        for fh in handles.values():
            fh.close()
    shutil.rmtree(out_folder, ignore_errors=True)
    os.replace(tmp, out_folder)
    return n


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
        arrays.update({"d1.value": np.array([value]), "d1.label": np.array([int(classes[label])]),
                       "d1.majority": np.array([int(ranks.max())]), "d1.total": np.array([int(ranks.sum())]),
                       "d1.children": np.array([children]), **top_arrays(1, *top_of_counts(ranks), classes)})
    _save_piece(out, {k: v.astype(np.int64) for k, v in arrays.items()}, 1, int(kept))


# ---------------------------------------------------------------------------------------------- the stages


def _save_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def _stage_scan(tf, window, plan, run_map, work: Path) -> dict:
    """Stage 1 (resumable): the class and value counts."""
    path = work / "scan.npz"
    if not path.exists():
        ranges = _ranges(tf.n_tokens, plan)
        calls = [dict(tf=tf, window=window, lo=a, hi=b, chunk_tokens=plan.chunk_tokens)
                 for a, b in ranges]
        scans = run_map(_scan_task, calls, plan.chunk_tokens * CHUNK_BYTES_PER_TOKEN)
        s = merge_scans(scans)
        np.savez(work / "scan.tmp.npz", **s)
        os.replace(work / "scan.tmp.npz", path)
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _ranges(n_tokens: int, plan: Plan) -> list[tuple[int, int]]:
    """Token ranges for parallel passes: one per worker (at least one chunk each)."""
    n = max(1, min(plan.workers, -(-n_tokens // plan.chunk_tokens)))
    edges = np.linspace(0, n_tokens, n + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _scan_task(tf, window, lo, hi, chunk_tokens) -> dict:
    """A scan of one range, given a TokenFile (memory-mapped where it runs)."""
    return scan_range(tf.tokens(), tf.offsets(), window, lo, hi, chunk_tokens)


def _spill_task(tf, **kwargs) -> int:
    """A spill of one range, given a TokenFile."""
    return spill_range(tf.tokens(), tf.offsets(), **kwargs)


def _spill(tf, window, plan, run_map, column, bounds, dtype, folder: Path) -> None:
    """Spill every instance into bucket files by `column` (one set of files per token range)."""
    shutil.rmtree(folder, ignore_errors=True)
    calls = [dict(tf=tf, window=window, lo=a, hi=b, chunk_tokens=plan.chunk_tokens, column=column,
                  bounds=bounds, dtype=dtype.str, folder=str(folder), tag=f"r{r:04d}")
             for r, (a, b) in enumerate(_ranges(tf.n_tokens, plan))]
    run_map(_spill_task, calls, plan.chunk_tokens * CHUNK_BYTES_PER_TOKEN)


def _stage_stats(tf, window, order, plan, run_map, work: Path, scan: dict, dtype) -> dict:
    """Stage 2 (resumable): feature weights and order from class-bucketed pair counts."""
    path = work / "stats.json"
    if not path.exists():
        cls = scan["class_counts"]
        n = int(cls.sum())
        positions = check_order(order, window)
        if positions is None:
            n_values = scan["value_counts"].shape[1]
            table = max(1, plan.task_bytes // (4 * TABLE_BYTES))
            check_fits(int(cls.max()), STATS_BYTES_PER_ROW, plan, "the most frequent class")
            bounds = group_consecutive(cls, plan.stats_rows)
            folder = work / "by-class"
            _spill(tf, window, plan, run_map, window, bounds, dtype, folder)
            calls = [dict(folder=str(folder), bucket=b, lo=lo, hi=hi, window=window, dtype=dtype.str,
                          n_values=n_values, table_entries=table) for b, (lo, hi) in enumerate(bounds)]
            mem = [task_bytes(cls[lo:hi].sum(), STATS_BYTES_PER_ROW) for lo, hi in bounds]
            per_bucket = run_map(bucket_pair_hists, calls, mem, budget_bytes=plan.budget_bytes)
            pair_hists = [merge_hists([np.array(h[j], dtype=np.int64).reshape(-1, 2) for h in per_bucket])
                          for j in range(window)]
            value_hists = [count_hist(scan["value_counts"][j]) for j in range(window)]
            weights = weights_from_hists(n, count_hist(cls), value_hists, pair_hists, order)
            positions = feature_order(weights)
            shutil.rmtree(folder, ignore_errors=True)
        else:
            weights = np.zeros(window)
        _save_json(path, {"weights": [float(x) for x in weights], "order": positions})
    return json.loads(path.read_text())


def _stage_spill(tf, window, plan, run_map, work: Path, scan: dict, stats: dict, dtype) -> list[tuple[int, int]]:
    """Stage 3 (resumable): the instances spilled into partitions by their value at the first position."""
    path = work / "partitions.json"
    first = stats["order"][0]
    counts = scan["value_counts"][first]  # a value over plan.build_rows gets a partition of its own, split later
    if not path.exists():
        bounds = group_consecutive(counts, plan.build_rows)
        shutil.rmtree(work / "built", ignore_errors=True)
        _spill(tf, window, plan, run_map, first, bounds, dtype, work / "by-value")
        _save_json(path, {"bounds": bounds})
    return [tuple(b) for b in json.loads(path.read_text())["bounds"]]


def _stage_build(window, plan, run_map, progress, work: Path, scan: dict, stats: dict, bounds,
                 dtype) -> list[Path]:
    """Stage 4 (resumable): every piece not yet built, built (in parallel through run_map); the pieces in order.

    A partition over `plan.build_rows` is one hot value: it is split by the value at the second position of the
    feature order into sub-partitions, each built into its part of the value's subtree, under a head piece
    holding the value's own node (`hot_head`).
    """
    cls = scan["class_counts"]
    ids = np.flatnonzero(cls)
    by_prio = class_priority(cls[ids], scan["class_first"][ids])
    classes = ids[by_prio].astype(np.int64)
    prio_lut = np.zeros(len(cls), dtype=min_uint_dtype(len(classes)))
    prio_lut[classes] = np.arange(len(classes))
    built = work / "built"
    built.mkdir(exist_ok=True)
    for leftover in built.glob("*.tmp.npz"):
        leftover.unlink()  # a build killed part-way: never used
    order = stats["order"]
    counts = scan["value_counts"][order[0]]
    rows = [int(counts[lo:hi].sum()) for lo, hi in bounds]
    common = dict(window=window, dtype=dtype.str, positions=order, prio_lut=prio_lut, classes=classes)
    outs, calls, mem, heads = [], [], [], []
    for b, (lo, _) in enumerate(bounds):
        head = built / f"p{b:06d}.npz"
        if rows[b] <= plan.build_rows:
            outs.append(head)
            if not head.exists():
                calls.append(dict(folder=str(work / "by-value"), bucket=b, out=str(head), **common))
                mem.append(task_bytes(rows[b], BUILD_BYTES_PER_ROW))
            continue
        split = _split_hot(window, plan, run_map, work, b, order, prio_lut, dtype)
        subs = [built / f"p{b:06d}.s{k:06d}.npz" for k in range(len(split["bounds"]))]
        outs += [head, *subs]
        if not head.exists():
            heads.append((lo, np.array(split["ranks"], np.int64), subs, head))
            for k, sub in enumerate(subs):
                if not sub.exists():
                    calls.append(dict(folder=split["folder"], bucket=k, out=str(sub), parent_label=split["label"],
                                      **common))
                    mem.append(task_bytes(split["rows"][k], BUILD_BYTES_PER_ROW))
    total = len(outs) - sum(r > plan.build_rows for r in rows)  # the pieces build_partition makes (no heads)
    _with_progress(run_map, progress, total)(build_partition, calls, mem, budget_bytes=plan.budget_bytes)
    for value, ranks, subs, head in heads:
        hot_head(value, ranks, classes, [str(x) for x in subs], window, str(head))
        shutil.rmtree(work / "hot" / f"b{int(head.stem[1:]):06d}", ignore_errors=True)
    return outs


def _split_hot(window, plan, run_map, work: Path, bucket: int, order, prio_lut, dtype) -> dict:
    """A hot value's bucket split by the value at the second position (resumable): sub-bounds, rows, its label."""
    path = work / "hot" / f"b{bucket:06d}.json"
    folder = work / "hot" / f"b{bucket:06d}"
    chunk = dict(window=window, dtype=dtype.str, chunk_rows=plan.chunk_tokens)
    chunk_mem = plan.chunk_tokens * CHUNK_BYTES_PER_TOKEN
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        (c,) = run_map(hot_counts, [dict(folder=str(work / "by-value"), bucket=bucket, column=order[1],
                                         prio_lut=prio_lut, **chunk)], chunk_mem)
        check_fits(int(c["values"].max()), BUILD_BYTES_PER_ROW, plan,
                   f"the most frequent pair of values at positions {order[0]}, {order[1]}")
        bounds = group_consecutive(c["values"], plan.build_rows)
        ranks = c["ranks"]
        _save_json(path, {"bounds": bounds, "rows": [int(c["values"][lo:hi].sum()) for lo, hi in bounds],
                          "ranks": ranks.tolist(), "label": int(np.argmax(ranks)), "folder": str(folder)})
    split = json.loads(path.read_text())
    head = work / "built" / f"p{bucket:06d}.npz"
    if not head.exists() and not folder.exists():
        run_map(resplit_bucket, [dict(folder=str(work / "by-value"), bucket=bucket, column=order[1],
                                      bounds=[tuple(b) for b in split["bounds"]], out_folder=str(folder), **chunk)],
                chunk_mem)
    return split


def _join(outs: list[Path], window: int, meta: dict, out_path: Path) -> tuple[int, int]:
    """Stage 5: write the tree file from the built pieces; returns (bytes, nodes after pruning)."""
    names = array_names(window)
    lengths = {n: 0 for n in names}
    tops = {n: 0 for n in names}
    for out in outs:
        with np.load(out) as z:
            for n in names:
                a = z[n]
                lengths[n] += len(a)
                tops[n] = max(tops[n], int(a.max()) if len(a) else 0)

    def chunks(name):
        for out in outs:
            with np.load(out) as z:
                yield z[name]

    columns = [Column(n, min_uint_dtype(tops[n]), lengths[n], lambda n=n: chunks(n)) for n in names]
    return write_columns(out_path, columns, meta), meta["nodes_after_prune"]


def build_partitioned(tf, window: int, order, work_dir, out_path, meta: dict, plan: Plan,
                      run_map: TaskMap | None = None, progress: Progress | None = None) -> dict:
    """Build the tree of a TokenFile's instances out of core into `out_path`; resumes from `work_dir`.

    Returns a summary: instances, partitions, nodes, bytes, wall seconds per stage.
    """
    run_map = run_map or local_map
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    dtype = compact_dtype(_max_token(tf) + 1)
    t, times = time.perf_counter(), {}

    def step(name: str) -> None:  # the time since the last step, under `name`
        times[name] = time.perf_counter() - t - sum(times.values())

    scan = _stage_scan(tf, window, plan, run_map, work)
    step("scan_s")
    _report(progress, "statistics", 0, 1)
    stats = _stage_stats(tf, window, order, plan, run_map, work, scan, dtype)
    step("stats_s")
    _report(progress, "statistics", 1, 1)
    bounds = _stage_spill(tf, window, plan, run_map, work, scan, stats, dtype)
    step("spill_s")
    outs = _stage_build(window, plan, run_map, progress, work, scan, stats, bounds, dtype)
    step("build_s")
    nodes = [0, 0]
    for out in outs:
        with np.load(out) as z:
            nodes[0] += int(z["before"])
            nodes[1] += int(z["after"])
    cls = scan["class_counts"]
    ids = np.flatnonzero(cls)
    by_prio = class_priority(cls[ids], scan["class_first"][ids])
    full = tree_meta(meta, window=window, positions=stats["order"], order=order, weights=np.array(stats["weights"]),
                     n_instances=int(cls.sum()), classes=ids[by_prio], class_counts_by_prio=cls[ids][by_prio],
                     nodes=tuple(nodes))
    n_bytes, _ = _join(outs, window, full, Path(out_path))
    step("join_s")
    logger.info("igtree (partitioned): %d instances, %d partitions, %d -> %d nodes, %s", cls.sum(), len(bounds),
                nodes[0], nodes[1], times)
    hot = len({o.name.split(".")[0] for o in outs if ".s" in o.name})
    return {"instances": int(cls.sum()), "partitions": len(bounds), "hot_values": hot, "pieces": len(outs) - hot,
            "nodes_before_prune": nodes[0],
            "nodes_after_prune": nodes[1], "bytes": n_bytes, **times}


def _max_token(tf) -> int:
    """The largest token id in the file, read from its dtype's range (cheap) or a pass when needed."""
    return 65534 if np.dtype(tf.dtype) == np.uint16 else int(tf.tokens().max())


def _report(progress: Progress | None, stage: str, done: int, total: int) -> None:
    if progress is not None:
        progress(stage, done, total)


def _with_progress(run_map: TaskMap, progress: Progress | None, total: int) -> TaskMap:
    """A run_map that reports 'partitions' done (those already built count as done) after each call."""
    def mapped(fn, calls, memory_bytes, on_done=None, budget_bytes=None):
        already = total - len(calls)
        _report(progress, "partitions", already, total)
        return run_map(fn, calls, memory_bytes, lambda i: _report(progress, "partitions", already + i, total),
                       budget_bytes=budget_bytes)
    return mapped
