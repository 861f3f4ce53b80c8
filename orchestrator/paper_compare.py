"""`greenspec export --compare paper`: a run's numbers beside the seed paper's, cell by cell, with differences.

The run side is the export's summary (one row per strategy x task x k x regime), the draft latencies stored by
`greenspec latency` for the experiment, and Table 5 (the paper's redundancy definitions) over the greedy
reference continuations: decoding is output-preserving, so those are the texts every strategy produced.
"""

from __future__ import annotations

import sys

import pandas as pd
from sqlalchemy.orm import Session

from workers.errors import GreenspecError

SHOWN = ["source", "metric", "strategy", "task", "k", "regime", "paper", "paper_max", "ours", "diff", "rel_diff",
         "in_range"]


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


def render(df: pd.DataFrame, fmt: str) -> str | bytes:
    """The comparison in `fmt` (csv keeps every column; markdown and latex the main ones; parquet as bytes)."""
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "markdown":
        return df[SHOWN].to_markdown(index=False, floatfmt=".3g")
    if fmt == "latex":
        return df[SHOWN].to_latex(index=False, float_format="%.3g", na_rep="--")
    if fmt == "parquet":
        import io

        buf = io.BytesIO()
        df.astype({"k": str, "in_range": object}).to_parquet(buf, index=False)
        return buf.getvalue()
    raise GreenspecError(f"--format {fmt!r}: use csv, parquet, markdown or latex")


def write_comparison(session: Session, experiment: str | None, fmt: str, out: str) -> None:
    """Write the comparison to `out` ("-" is stdout; parquet needs a file)."""
    data = render(comparison_frame(session, experiment), fmt)
    if out == "-":
        if isinstance(data, bytes):
            raise GreenspecError("--format parquet needs --out FILE")
        sys.stdout.write(data if data.endswith("\n") else data + "\n")
        return
    with open(out, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
