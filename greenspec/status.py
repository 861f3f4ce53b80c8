"""What `greenspec status` prints: each experiment's cells counted by kind (replayed, timed, reference, training,
label, cost model) and state, and its failed cells, identical lines grouped with a count.

Example:
    demo: cells 11233 done, 0 running, 0 pending, 0 failed; 11173 generations stored
      replay: 11040 done, 0 running, 0 pending, 0 failed
      timed: 60 done, 0 running, 0 pending, 0 failed
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from storage.models import CELL_KINDS, CELL_STATES
from workers.training.artifacts import BY_CELL_KIND

# the groups status counts, in the order a run meets them; every artifact kind but label is training
KIND_GROUPS: dict[str, tuple[str, ...]] = {
    "training": tuple(k for k in BY_CELL_KIND if k != "label"),
    "label": ("label",),
    "costmodel": ("costmodel",),
    "reference": ("reference",),
    "replay": ("replay",),
    "timed": ("sweep",),
}
MAX_FAILURE_LINES = 20


def empty_counts() -> dict:
    """`status --json` of a database with no experiment: every state and kind at zero."""
    zero = dict.fromkeys(CELL_STATES, 0)
    return {"experiment": None, "cells": dict(zero), **{k: dict(zero) for k in CELL_KINDS}, "generations": 0}


def kind_groups(counts: dict) -> dict[str, dict[str, int]]:
    """The cells of `counts` (storage.queries.status_counts) by group of kinds, each by state; a kind no group names
    (a newer greenspec's) is its own group."""
    kinds = [k for k, v in counts.items() if isinstance(v, dict) and k != "cells" and set(v) <= set(CELL_STATES)]
    groups = {**KIND_GROUPS, **{k: (k,) for k in kinds if not any(k in g for g in KIND_GROUPS.values())}}
    return {
        name: {state: sum(counts.get(k, {}).get(state, 0) for k in members) for state in CELL_STATES}
        for name, members in groups.items()
    }


def _states(c: dict) -> str:
    return f"{c['done']} done, {c['running']} running, {c['pending']} pending, {c['failed']} failed"


def status_lines(name: str, counts: dict, failures: list[str], notes: str = "", tags: Sequence[str] = ()) -> list[str]:
    """One experiment: its cells, its spec's tags and notes, each group of kinds that has any, and its failures
    (identical lines once)."""
    lines = [f"{name}: cells {_states(counts['cells'])}; {counts['generations']} generations stored"]
    lines += [f"  tags: {', '.join(tags)}"] if tags else []
    lines += [f"  notes: {' '.join(notes.split())}"] if notes.strip() else []
    lines += [f"  {group}: {_states(c)}" for group, c in kind_groups(counts).items() if sum(c.values())]
    if failures:
        grouped = list(Counter(failures).items())  # first seen first
        lines.append("  failed cells:")
        lines += [f"    {line}" + (f" ({n} cells)" if n > 1 else "") for line, n in grouped[:MAX_FAILURE_LINES]]
        if len(grouped) > MAX_FAILURE_LINES:
            rest = sum(n for _, n in grouped[MAX_FAILURE_LINES:])
            lines.append(f"    ... and {rest} more failed cells")
    return lines
