"""Standalone next-token latency of a draft, no verifier involved (`greenspec latency SPEC`; the spec's side, which
drafts and which contexts: `orchestrator.run.latency`).

The paper's §2.3 protocol: single-token queries `propose(context, 1)` over 10 prompts x 5 repetitions. The
contexts are the spec's task prompts (round-robin over its tasks, encoded with the verifier's tokenizer). Each
draft is built as the sweep builds it; every context gets one untimed query first (an n-gram absorbs the
context, a neural draft prefills its KV cache), so the timed repeats are the steady-state per-token cost of a
running session. Olifant strategies are timed with the native IGTree engine and, beside it, with TiMBL
(`TimblIGTree`) on the same corpus; an instance base the run already trained is reused, otherwise it is
trained here, in-process, by the trainer's own code path (same file name, so a later run reuses it too).
A strategy that scores its guesses (adaptive length, `ibase_min`, a `confidence` other than depth) reads match
depths or node shares, which TiMBL's lookups do not give: it is timed on the native engine only, and the table
says so under it (`timbl_notes`).

Example:
    >>> row = summarize_times(strategy, draft_name, "native", time_proposals(draft, contexts, repeats=5))
    >>> format_table([row]).splitlines()[0]
    '| strategy | draft | engine | queries | mean_us | median_us | p95_us |'
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from workers.drafts import Draft

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LatencyOptions:
    """How many prompts and repetitions (the paper: 10 x 5), whether to add TiMBL, where neural drafts run."""

    prompts: int = 10
    repeats: int = 5
    timbl: bool = True
    device: str = "cpu"  # the paper times TinyLlama on CPU


@dataclass(frozen=True)
class LatencyRow:
    """One strategy's next-token latency over `queries` timed single-token proposals (microseconds)."""

    strategy: str
    draft: str
    engine: str  # olifant: "native" or "timbl"; otherwise the draft's name
    queries: int
    mean_us: float
    median_us: float
    p95_us: float
    min_us: float


def time_proposals(draft: Draft, contexts: Sequence[Sequence[int]], repeats: int) -> list[float]:
    """Seconds per `propose(context, 1)`, `repeats` timed calls per context after one untimed call."""
    times: list[float] = []
    for ctx in contexts:
        draft.reset()
        draft.propose(ctx, 1)  # session state (n-gram table, KV cache) as in a running generation
        for _ in range(repeats):
            t0 = time.perf_counter()
            draft.propose(ctx, 1)
            times.append(time.perf_counter() - t0)
    return times


def summarize_times(strategy: str, draft: str, engine: str, times_s: Sequence[float]) -> LatencyRow:
    """Mean, median, 95th percentile and minimum of per-query times, in microseconds."""
    us = np.asarray(times_s, dtype=float) * 1e6
    return LatencyRow(
        strategy=strategy,
        draft=draft,
        engine=engine,
        queries=len(us),
        mean_us=float(us.mean()),
        median_us=float(np.median(us)),
        p95_us=float(np.percentile(us, 95)),
        min_us=float(us.min()),
    )


def timbl_gap(options: dict[str, Any]) -> str | None:
    """Why TiMBL cannot time a draft with these options, or None: TiMBL's lookups give neither the match depth
    nor the node's majority share, and adaptive length, `ibase_min` and a `confidence` other than depth read them."""
    if options.get("adaptive"):
        return "adaptive length"
    if options.get("ibase_min", 0) > 0:
        return f"ibase_min = {options['ibase_min']}"
    if options.get("confidence", "depth") != "depth":
        return f'confidence = "{options["confidence"]}"'
    return None


def rows_frame(rows: Sequence[LatencyRow]) -> pd.DataFrame:
    """The rows as a DataFrame (one column per field)."""
    return pd.DataFrame([asdict(r) for r in rows], columns=list(LatencyRow.__dataclass_fields__))


def format_table(rows: Sequence[LatencyRow], notes: Sequence[str] = ()) -> str:
    """A Markdown table of the rows (microseconds, 1 decimal), then one line per note (`timbl_notes`)."""
    df = rows_frame(rows).drop(columns=["min_us"])
    return "\n".join([df.to_markdown(index=False, floatfmt=".1f"), *(f"note: {n}" for n in notes)])
