"""How an out-of-core training fits its memory budget: per-task bytes, chunk size, partition and bucket caps.

Example:
    >>> plan_training(budget_bytes=2 << 30, workers=2).build_rows
    7158278
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workers.errors import IBaseError

# Peak numpy allocations per unit (tracemalloc) measured on 1M tokens of real text (Mistral tokenizer), rounded
# up by ~10%: building a partition 138 B/row, a class bucket's pair counts 45, windowing and bucketing a chunk of
# the token file 89 B/token, `IGTree.fit` on int32 instances 275 B/row instances included. See BENCHMARKS.md.
BUILD_BYTES_PER_ROW = 150
STATS_BYTES_PER_ROW = 50
CHUNK_BYTES_PER_TOKEN = 100
IN_MEMORY_BYTES_PER_ROW = 300
MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS = 1 << 12, 1 << 22
TABLE_BYTES = 8  # a dense pair-count table entry (int64)


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

    @property
    def chunk_bytes(self) -> int:
        """The memory a call over one chunk of the token file declares."""
        return self.chunk_tokens * CHUNK_BYTES_PER_TOKEN


def plan_training(budget_bytes: int, workers: int = 1) -> Plan:
    """Split a budget over `workers` concurrent tasks; refuse one too small for even the smallest chunk."""
    workers = max(1, int(workers))
    task = int(budget_bytes) // workers
    need = MIN_CHUNK_TOKENS * CHUNK_BYTES_PER_TOKEN * workers
    if budget_bytes < need:
        raise IBaseError(f"memory budget {_gb(budget_bytes)} is too small; the smallest that works is {_gb(need)}")
    chunk = int(min(MAX_CHUNK_TOKENS, max(MIN_CHUNK_TOKENS, task // (4 * CHUNK_BYTES_PER_TOKEN))))
    return Plan(
        budget_bytes=int(budget_bytes),
        workers=workers,
        task_bytes=task,
        chunk_tokens=chunk,
        build_rows=task // BUILD_BYTES_PER_ROW,
        stats_rows=task // STATS_BYTES_PER_ROW,
    )


def _gb(n_bytes: float) -> str:
    """Bytes as a memory_gb value, rounded up to 3 significant digits (so the value shown is enough)."""
    gb = max(n_bytes, 1) / 1e9
    step = 10.0 ** (math.floor(math.log10(gb)) - 2)
    return f"{math.ceil(gb / step - 1e-9) * step:.{max(0, 2 - math.floor(math.log10(gb)))}f} GB"


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
        raise IBaseError(
            f"memory budget {_gb(plan.budget_bytes)} is too small for {what} ({largest_rows:,} "
            f"instances); the smallest that works is {_gb(need)}"
        )


def group_consecutive(counts: np.ndarray, cap: int) -> list[tuple[int, int]]:
    """Consecutive [lo, hi) id ranges over the ids with count > 0, each summing to at most `cap` (one id may
    exceed it)."""
    ids = np.flatnonzero(counts)
    groups, lo, total, prev = [], None, 0, -1
    for i in ids.tolist():
        count = int(counts[i])
        if lo is not None and total + count > cap:
            groups.append((lo, prev + 1))
            lo = None
        if lo is None:
            lo, total = i, 0
        total, prev = total + count, i
    if lo is not None:
        groups.append((lo, prev + 1))
    return groups
