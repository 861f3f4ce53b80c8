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

Stages 1 to 4 are lists of independent calls (`workers.igtree.spill`) handed to a `TaskMap` (run here one by
one, or as parallel Ray tasks by `workers.training.ray_tasks`), each declaring the memory it needs. This module
coordinates the stages (`workers.igtree.stages`) within the memory plan (`workers.igtree.plan`). The result equals
`IGTree.fit` on the same instances byte for byte.

Example:
    >>> plan = plan_training(budget_bytes=2 << 30, workers=2)
    >>> summary = build_partitioned(tf, 4, "gain_ratio", BuildTarget(out_path, work_dir, meta), plan)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workers.igtree.build import tree_meta
from workers.igtree.instances import TokenFile
from workers.igtree.plan import IN_MEMORY_BYTES_PER_ROW, Plan, group_consecutive, plan_training
from workers.igtree.spill import ClassTable, compact_dtype
from workers.igtree.stages import (
    Job,
    Progress,
    TaskMap,
    join_pieces,
    nodes_of,
    report,
    stage_build,
    stage_scan,
    stage_spill,
    stage_stats,
)

logger = logging.getLogger(__name__)

__all__ = [
    "IN_MEMORY_BYTES_PER_ROW",
    "BuildSummary",
    "BuildTarget",
    "Plan",
    "Progress",
    "TaskMap",
    "build_partitioned",
    "compact_dtype",
    "group_consecutive",
    "local_map",
    "plan_training",
]


def local_map(
    fn: Callable,
    calls: list[dict],
    memory_bytes: int | list[int],
    on_done: Callable[[int], None] | None = None,
    budget_bytes: int | None = None,
) -> list:
    """Run the calls here, one after the other (memory is only declared); on_done(n done) after each."""
    out = []
    for i, kwargs in enumerate(calls):
        out.append(fn(**kwargs))
        if on_done:
            on_done(i + 1)
    return out


@dataclass(frozen=True)
class BuildTarget:
    """What the out-of-core build writes: the tree file `out_path` carrying `meta`, from stages resumable in
    `work_dir`."""

    out_path: str | Path
    work_dir: str | Path
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class BuildSummary:
    """What the out-of-core build made: instances, partitions, hot values, pieces, nodes, bytes, and wall seconds
    per stage (`stage_s`: scan_s, stats_s, spill_s, build_s, join_s)."""

    instances: int
    partitions: int
    hot_values: int
    pieces: int
    nodes_before_prune: int
    nodes_after_prune: int
    bytes: int
    stage_s: dict[str, float] = field(default_factory=dict)


def build_partitioned(
    tf: TokenFile,
    window: int,
    order: str,
    target: BuildTarget,
    plan: Plan,
    run_map: TaskMap | None = None,
    progress: Progress | None = None,
) -> BuildSummary:
    """Build the tree of a TokenFile's instances out of core into `target.out_path`; resumes from its work folder."""
    job = Job(tf, window, plan, run_map or local_map, Path(target.work_dir), compact_dtype(_max_token(tf) + 1))
    job.work.mkdir(parents=True, exist_ok=True)
    t, times = time.perf_counter(), {}

    def step(name: str) -> None:  # the time since the last step, under `name`
        times[name] = time.perf_counter() - t - sum(times.values())

    scan = stage_scan(job)
    step("scan_s")
    report(progress, "statistics", 0, 1)
    stats = stage_stats(job, order, scan)
    step("stats_s")
    report(progress, "statistics", 1, 1)
    bounds = stage_spill(job, scan, stats)
    step("spill_s")
    table = ClassTable.of(scan)
    pieces = stage_build(job, progress, scan, stats, bounds, table)
    step("build_s")
    nodes = nodes_of(pieces)
    n_instances = int(scan.class_counts.sum())
    full = tree_meta(
        target.meta,
        positions=stats.order,
        order=order,
        weights=np.array(stats.weights),
        n_instances=n_instances,
        classes=table.classes,
        class_counts_by_prio=scan.class_counts[table.classes],
        nodes=nodes,
    )
    n_bytes = join_pieces(pieces, window, full, Path(target.out_path))
    step("join_s")
    msg = "igtree (partitioned): %d instances, %d partitions, %d -> %d nodes, %s"
    logger.info(msg, n_instances, len(bounds), *nodes, times)
    hot = len({p.name.split(".")[0] for p in pieces if ".s" in p.name})
    return BuildSummary(
        instances=n_instances,
        partitions=len(bounds),
        hot_values=hot,
        pieces=len(pieces) - hot,
        nodes_before_prune=nodes[0],
        nodes_after_prune=nodes[1],
        bytes=n_bytes,
        stage_s=times,
    )


def _max_token(tf: TokenFile) -> int:
    """The largest token id in the file, read from its dtype's range (cheap) or a pass when needed."""
    return 65534 if np.dtype(tf.dtype) == np.uint16 else int(tf.tokens().max())
