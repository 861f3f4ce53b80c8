"""The five stages of the out-of-core build (`workers.igtree.partitioned`), each resumable: a stage whose result
file exists in the work folder is never redone (results are written as tmp + rename).

Each stage hands its independent calls (`workers.igtree.spill`) to the job's `TaskMap` and keeps only small
results here: scan (class and value counts), stats (feature weights and order), spill (partitions by the value at
the first position), build (each partition's piece of the tree; a hot value split again by the second position)
and join (the pieces written as one .igtree file).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workers.igtree.build import (
    array_names,
    check_order,
    count_hist,
    feature_order,
    merge_hists,
    min_uint_dtype,
    weights_from_hists,
)
from workers.igtree.fileformat import Column, write_columns
from workers.igtree.instances import TokenFile
from workers.igtree.plan import (
    BUILD_BYTES_PER_ROW,
    STATS_BYTES_PER_ROW,
    TABLE_BYTES,
    Plan,
    check_fits,
    group_consecutive,
    task_bytes,
)
from workers.igtree.spill import (
    Buckets,
    ClassTable,
    HotCounts,
    Scan,
    bucket_pair_hists,
    build_partition,
    hot_counts,
    hot_head,
    merge_scans,
    resplit_bucket,
    scan_token_range,
    spill_token_range,
)

Progress = Callable[[str, int, int], None]  # (stage, done, total)
# (function, keyword arguments per call, memory bytes: one for all or one per call, on_done=None, budget_bytes=None)
TaskMap = Callable[..., list]


@dataclass(frozen=True)
class Job:
    """What every stage needs: the token file, the window, the plan, the task map, the work folder, the row dtype."""

    tf: TokenFile
    window: int
    plan: Plan
    run_map: TaskMap
    work: Path
    dtype: np.dtype


@dataclass(frozen=True)
class FeatureStats:
    """Stage 2's result: the feature weights and the positions in descending weight (the tree's order)."""

    weights: list[float]
    order: list[int]


@dataclass(frozen=True)
class HotSplit:
    """A hot value's bucket split by the second position: sub-partition bounds and rows, the value's class counts
    by priority rank, its label (a rank) and the folder of its sub-buckets."""

    bounds: list[tuple[int, int]]
    rows: list[int]
    ranks: list[int]
    label: int
    folder: str


def save_json(path: Path, obj: dict) -> None:
    """A stage result written atomically (tmp + rename): a stage whose file exists is done."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def stage_scan(job: Job) -> Scan:
    """Stage 1 (resumable): the class and value counts, range by range, merged here."""
    path = job.work / "scan.npz"
    if not path.exists():
        calls = [
            dict(tf=job.tf, window=job.window, lo=a, hi=b, chunk_tokens=job.plan.chunk_tokens)
            for a, b in token_ranges(job.tf.n_tokens, job.plan)
        ]
        scan = merge_scans(job.run_map(scan_token_range, calls, job.plan.chunk_bytes))
        np.savez(job.work / "scan.tmp.npz", **scan.arrays())
        os.replace(job.work / "scan.tmp.npz", path)
    with np.load(path) as z:
        return Scan(z["class_counts"], z["class_first"], z["value_counts"])


def token_ranges(n_tokens: int, plan: Plan) -> list[tuple[int, int]]:
    """Token ranges for parallel passes: one per worker (at least one chunk each)."""
    n = max(1, min(plan.workers, -(-n_tokens // plan.chunk_tokens)))
    edges = np.linspace(0, n_tokens, n + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def spill_instances(job: Job, column: int, bounds: list[tuple[int, int]], folder: Path) -> None:
    """Spill every instance into bucket files by `column` (one set of files per token range)."""
    shutil.rmtree(folder, ignore_errors=True)
    calls = [
        dict(
            tf=job.tf,
            window=job.window,
            lo=a,
            hi=b,
            chunk_tokens=job.plan.chunk_tokens,
            buckets=Buckets(column, bounds, job.dtype.str, str(folder), tag=f"r{r:04d}"),
        )
        for r, (a, b) in enumerate(token_ranges(job.tf.n_tokens, job.plan))
    ]
    job.run_map(spill_token_range, calls, job.plan.chunk_bytes)


def stage_stats(job: Job, order: str, scan: Scan) -> FeatureStats:
    """Stage 2 (resumable): feature weights and order from class-bucketed pair counts."""
    path = job.work / "stats.json"
    if not path.exists():
        positions = check_order(order, job.window)
        if positions is None:
            weights = bucket_weights(job, order, scan)
            positions = feature_order(weights)
        else:
            weights = np.zeros(job.window)
        save_json(path, {"weights": [float(x) for x in weights], "order": [int(p) for p in positions]})
    saved = json.loads(path.read_text())
    return FeatureStats(weights=saved["weights"], order=saved["order"])


def bucket_weights(job: Job, order: str, scan: Scan) -> np.ndarray:
    """The feature weights: instances spilled by class, each class bucket's pair histograms counted, merged."""
    class_counts, plan, window = scan.class_counts, job.plan, job.window
    n_values = scan.value_counts.shape[1]
    table_entries = max(1, plan.task_bytes // (4 * TABLE_BYTES))
    check_fits(int(class_counts.max()), STATS_BYTES_PER_ROW, plan, "the most frequent class")
    bounds = group_consecutive(class_counts, plan.stats_rows)
    folder = job.work / "by-class"
    spill_instances(job, window, bounds, folder)
    calls = [
        dict(
            folder=str(folder),
            bucket=b,
            lo=lo,
            hi=hi,
            window=window,
            dtype=job.dtype.str,
            n_values=n_values,
            table_entries=table_entries,
        )
        for b, (lo, hi) in enumerate(bounds)
    ]
    memory = [task_bytes(class_counts[lo:hi].sum(), STATS_BYTES_PER_ROW) for lo, hi in bounds]
    per_bucket = job.run_map(bucket_pair_hists, calls, memory, budget_bytes=plan.budget_bytes)
    pair_hists = [
        merge_hists([np.array(h[j], dtype=np.int64).reshape(-1, 2) for h in per_bucket]) for j in range(window)
    ]
    value_hists = [count_hist(scan.value_counts[j]) for j in range(window)]
    shutil.rmtree(folder, ignore_errors=True)
    return weights_from_hists(int(class_counts.sum()), count_hist(class_counts), value_hists, pair_hists, order)


def stage_spill(job: Job, scan: Scan, stats: FeatureStats) -> list[tuple[int, int]]:
    """Stage 3 (resumable): the instances spilled into partitions by their value at the first position."""
    path = job.work / "partitions.json"
    first = stats.order[0]
    if not path.exists():  # a value over plan.build_rows gets a partition of its own, split later
        bounds = group_consecutive(scan.value_counts[first], job.plan.build_rows)
        shutil.rmtree(job.work / "built", ignore_errors=True)
        spill_instances(job, first, bounds, job.work / "by-value")
        save_json(path, {"bounds": bounds})
    return [(int(lo), int(hi)) for lo, hi in json.loads(path.read_text())["bounds"]]


def stage_build(
    job: Job,
    progress: Progress | None,
    scan: Scan,
    stats: FeatureStats,
    bounds: list[tuple[int, int]],
    table: ClassTable,
) -> list[Path]:
    """Stage 4 (resumable): every piece not yet built, built (in parallel through run_map); the pieces in order.

    A partition over `plan.build_rows` is one hot value: it is split by the value at the second position of the
    feature order into sub-partitions, each built into its part of the value's subtree, under a head piece
    holding the value's own node (`hot_head`).
    """
    built = job.work / "built"
    built.mkdir(exist_ok=True)
    for leftover in built.glob("*.tmp.npz"):
        leftover.unlink()  # a build killed part-way: never used
    value_counts = scan.value_counts[stats.order[0]]
    rows = [int(value_counts[lo:hi].sum()) for lo, hi in bounds]
    common = dict(window=job.window, dtype=job.dtype.str, positions=stats.order, table=table)
    pieces, calls, memory, heads = [], [], [], []
    for b, (lo, _) in enumerate(bounds):
        head = built / f"p{b:06d}.npz"
        if rows[b] <= job.plan.build_rows:
            pieces.append(head)
            if not head.exists():
                calls.append(dict(folder=str(job.work / "by-value"), bucket=b, out=str(head), **common))
                memory.append(task_bytes(rows[b], BUILD_BYTES_PER_ROW))
            continue
        split = split_hot(job, b, stats.order, table.prio_lut)
        subs = [built / f"p{b:06d}.s{k:06d}.npz" for k in range(len(split.bounds))]
        pieces += [head, *subs]
        if not head.exists():
            heads.append((lo, np.array(split.ranks, np.int64), subs, head))
            for k, sub in enumerate(subs):
                if not sub.exists():
                    calls.append(dict(folder=split.folder, bucket=k, out=str(sub), parent_label=split.label, **common))
                    memory.append(task_bytes(split.rows[k], BUILD_BYTES_PER_ROW))
    total = len(pieces) - sum(r > job.plan.build_rows for r in rows)  # the pieces build_partition makes (no heads)
    with_progress(job.run_map, progress, total)(build_partition, calls, memory, budget_bytes=job.plan.budget_bytes)
    for value, ranks, subs, head in heads:
        hot_head(value, ranks, table.classes, [str(x) for x in subs], job.window, str(head))
        shutil.rmtree(job.work / "hot" / f"b{int(head.stem[1:]):06d}", ignore_errors=True)
    return pieces


def split_hot(job: Job, bucket: int, order: list[int], prio_lut: np.ndarray) -> HotSplit:
    """A hot value's bucket split by the value at the second position (resumable): sub-bounds, rows, its label."""
    path = job.work / "hot" / f"b{bucket:06d}.json"
    folder = job.work / "hot" / f"b{bucket:06d}"
    chunk = dict(window=job.window, dtype=job.dtype.str, chunk_rows=job.plan.chunk_tokens)
    by_value = str(job.work / "by-value")
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        (counts,) = job.run_map(
            hot_counts,
            [dict(folder=by_value, bucket=bucket, column=order[1], prio_lut=prio_lut, **chunk)],
            job.plan.chunk_bytes,
        )
        counts: HotCounts
        check_fits(
            int(counts.values.max()),
            BUILD_BYTES_PER_ROW,
            job.plan,
            f"the most frequent pair of values at positions {order[0]}, {order[1]}",
        )
        bounds = group_consecutive(counts.values, job.plan.build_rows)
        save_json(
            path,
            {
                "bounds": bounds,
                "rows": [int(counts.values[lo:hi].sum()) for lo, hi in bounds],
                "ranks": counts.ranks.tolist(),
                "label": int(np.argmax(counts.ranks)),
                "folder": str(folder),
            },
        )
    saved = json.loads(path.read_text())
    split = HotSplit(
        bounds=[(int(lo), int(hi)) for lo, hi in saved["bounds"]],
        rows=saved["rows"],
        ranks=saved["ranks"],
        label=saved["label"],
        folder=saved["folder"],
    )
    head = job.work / "built" / f"p{bucket:06d}.npz"
    if not head.exists() and not folder.exists():
        job.run_map(
            resplit_bucket,
            [
                dict(
                    folder=by_value,
                    bucket=bucket,
                    column=order[1],
                    bounds=split.bounds,
                    out_folder=str(folder),
                    **chunk,
                )
            ],
            job.plan.chunk_bytes,
        )
    return split


def join_pieces(pieces: list[Path], window: int, meta: dict, out_path: Path) -> int:
    """Stage 5: write the tree file from the built pieces; returns its bytes."""
    names = array_names(window)
    lengths = {n: 0 for n in names}
    tops = {n: 0 for n in names}
    for piece in pieces:
        with np.load(piece) as z:
            for n in names:
                a = z[n]
                lengths[n] += len(a)
                tops[n] = max(tops[n], int(a.max()) if len(a) else 0)

    def arrays_of(name: str):
        for piece in pieces:
            with np.load(piece) as z:
                yield z[name]

    columns = [Column(n, min_uint_dtype(tops[n]), lengths[n], lambda n=n: arrays_of(n)) for n in names]
    return write_columns(out_path, columns, meta)


def nodes_of(pieces: list[Path]) -> tuple[int, int]:
    """Nodes before and after pruning over all pieces."""
    before = after = 0
    for piece in pieces:
        with np.load(piece) as z:
            before += int(z["before"])
            after += int(z["after"])
    return before, after


def report(progress: Progress | None, stage: str, done: int, total: int) -> None:
    if progress is not None:
        progress(stage, done, total)


def with_progress(run_map: TaskMap, progress: Progress | None, total: int) -> TaskMap:
    """A run_map that reports 'partitions' done (those already built count as done) after each call."""

    def mapped(
        fn: Callable,
        calls: list[dict],
        memory_bytes: int | list[int],
        on_done: Callable[[int], None] | None = None,
        budget_bytes: int | None = None,
    ) -> list:
        already = total - len(calls)
        report(progress, "partitions", already, total)
        return run_map(
            fn,
            calls,
            memory_bytes,
            lambda i: report(progress, "partitions", already + i, total),
            budget_bytes=budget_bytes,
        )

    return mapped
