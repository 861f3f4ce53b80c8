"""`greenspec export --compare paper`: a run's numbers beside the seed paper's, cell by cell, with differences.

The run side is the export's summary (one row per strategy x task x k x regime), the draft latencies stored by
`greenspec latency` for the experiment, and Table 5 (the paper's redundancy definitions) over the greedy
reference continuations: decoding is output-preserving, so those are the texts every strategy produced.
"""

from __future__ import annotations

import pandas as pd

from storage.db import Session

SHOWN = [
    "source",
    "metric",
    "strategy",
    "task",
    "k",
    "regime",
    "paper",
    "paper_max",
    "ours",
    "diff",
    "rel_diff",
    "in_range",
]


def comparison_frame(session: Session, experiment: str | None) -> pd.DataFrame:
    """The comparison table of one experiment (newest when None)."""
    from orchestrator.export import export_frame
    from storage.latency import latency_frame
    from storage.paper import reference_tokens_frame
    from storage.queries import experiment_id
    from workers.paper import compare, redundancy_frame, run_frame

    summary = export_frame(session, experiment)
    name = str(summary["experiment"].iloc[0])
    refs = reference_tokens_frame(session, experiment_id(session, name))
    return compare(run_frame(summary, latency_frame(session, name), redundancy_frame(refs)))


def write_comparison(session: Session, experiment: str | None, fmt: str, out: str) -> None:
    """Write the comparison to `out` ("-" is stdout): csv and parquet keep every column, markdown and latex SHOWN."""
    from orchestrator.export import render, write_output

    df = comparison_frame(session, experiment)
    if fmt == "parquet":  # k mixes numbers and "best"; in_range mixes booleans and blanks
        df = df.astype({"k": str, "in_range": object})
    write_output(render(df, fmt, SHOWN), out)
