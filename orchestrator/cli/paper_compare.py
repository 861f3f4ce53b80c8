"""`greenspec export --compare paper`: a run's numbers beside the seed paper's, cell by cell, with differences.

Only matched rows are written: the run's tasks and strategies are paired with the paper's by the rule of
`analysis.paper_pairing` (or a `--map` file), and what is left out is counted on one line.

The run side is the export's summary (one row per strategy x task x k x regime), the draft latencies stored by
`greenspec latency` for the experiment, and Table 5 (the paper's redundancy definitions) over the greedy
reference continuations: decoding is output-preserving, so those are the texts every strategy produced.
"""

from __future__ import annotations

import pandas as pd

from analysis.columns import COMPARE_TEXT_COLUMNS
from analysis.paper_pairing import Comparison, compare_run
from storage.db import Session

SHOWN = COMPARE_TEXT_COLUMNS  # what markdown and latex show (`analysis.columns`)


def comparison(session: Session, experiment: str | None, map_file: str | None = None) -> Comparison:
    """The comparison of one experiment (newest when None): the run's names paired with the paper's by the rule of
    `analysis.paper_pairing` (and `map_file`), rows without a counterpart and paper numbers without a cell left out, counted."""
    from analysis import stored
    from analysis.paper import run_frame
    from analysis.paper_pairing import paper_names, read_map
    from greenspec.frames import export_frame
    from storage.browse import spec_toml
    from storage.latency import latency_frame
    from storage.queries import experiment_id

    summary = export_frame(session, experiment)
    name = str(summary["experiment"].iloc[0])
    exp_id = experiment_id(session, name)
    table5 = stored.frame(session, exp_id, stored.REFERENCES_TABLE5)  # the run's stored one, else computed
    run = run_frame(summary, latency_frame(session, name), table5)
    names = paper_names(run, spec_toml(session, exp_id), read_map(map_file) if map_file else None)
    return compare_run(run, names)


def comparison_frame(session: Session, experiment: str | None, map_file: str | None = None) -> pd.DataFrame:
    """The matched rows of the comparison of one experiment."""
    return comparison(session, experiment, map_file).table


def write_comparison(
    session: Session, experiment: str | None, fmt: str, out: str, map_file: str | None = None
) -> Comparison:
    """Write the comparison to `out` ("-" is stdout): csv and parquet keep every column, markdown and latex SHOWN;
    what was matched and left out, for the CLI's line."""
    from greenspec.frames import render, write_output

    result = comparison(session, experiment, map_file)
    df = result.table
    if fmt == "parquet":  # in_range mixes booleans and blanks
        df = df.astype({"in_range": object})
    write_output(render(df, fmt, SHOWN), out)
    return result
