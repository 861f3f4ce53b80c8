"""Overview: experiments, queue progress (live while a run is going), failures, instance bases."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, reads, ui
from dashboard.app import page_filters
from storage.columns import OVERVIEW_COLUMNS, SUMMARY

REFRESH_S = 5  # how often the queue redraws while cells are pending or running

RESULT_COLUMNS = OVERVIEW_COLUMNS  # storage.columns: the summary's columns the overview shows
RESULT_FORMATS = ui.column_formats(SUMMARY, RESULT_COLUMNS)
IBASE_COLUMNS = {
    "corpus": "corpus",
    "backend": "backend",
    "tokens": "tokens",
    "instances": "instances",
    "nodes_before_prune": "nodes before prune",
    "nodes_after_prune": "nodes after prune",
    "size_mb": "size (MB)",
    "train_s": "train (s)",
    "energy_j": "energy (J)",
    "power_source": "power source",
    "partitions": "partitions",
    "peak_gb": "peak RSS (GB)",
    "cpu_s": "CPU (s)",
    "energy_attribution": "energy attributed by",
}


def live(status: dict) -> bool:
    """Whether any cell still waits or runs (then the queue keeps refreshing)."""
    return bool(status["cells"]["pending"] or status["cells"]["running"])


def queue(f: ui.Filters, was_live: bool) -> None:
    """Queue progress and results so far; a fragment that reruns itself every few seconds while the run is live.

    Results are cached by data version, so a refresh re-aggregates only when new generations arrived.
    """
    counts = reads.status(f.url, f.experiment)
    if was_live and not live(counts):
        st.rerun()  # the run just ended: redraw the whole page once, which also stops the timer
    data = reads.version(f.url, f.exp_id) if was_live else f.version  # the generation count, exact
    sweep = counts["sweep"]
    total = sum(sweep.values())
    done = sweep["done"] + sweep["failed"]
    cols = st.columns(5)
    for col, (label, value) in zip(
        cols,
        [
            ("sweep cells", total),
            ("done", sweep["done"]),
            ("running", sweep["running"]),
            ("failed", sweep["failed"]),
            ("generations", data[1]),
        ],
    ):
        col.metric(label, value)
    st.progress(done / total if total else 0.0, text=f"sweep {done}/{total} finished")
    st.plotly_chart(charts.queue_progress(counts))
    if live(counts):
        st.caption(f"Run in progress: refreshing every {REFRESH_S} s.")
    results = f.apply(reads.summary(f.url, f.exp_id, data, f.pooled))
    ui.frame_block(results[RESULT_COLUMNS], "Results so far", "summary", column_config=RESULT_FORMATS)


f = page_filters()
st.caption(f"Experiment **{f.experiment}** · {'pooled (sum / sum)' if f.pooled else 'per-prompt means (the paper)'}")
ui.frame_block(reads.experiments(f.url), "Experiments", "experiments")

st.subheader("Queue progress")
is_live = live(reads.status(f.url, f.experiment))
st.fragment(run_every=REFRESH_S if is_live else None)(queue)(f, is_live)

ui.frame_block(reads.failures(f.url, f.exp_id), "Failures", "failures", empty="No failed cells.")
bases = reads.instance_bases(f.url, f.exp_id)
if not bases.empty:
    bases = bases.assign(size_mb=bases["bytes"] / 1e6, peak_gb=bases["peak_rss_bytes"] / 1e9)
    bases = bases[list(IBASE_COLUMNS)].rename(columns=IBASE_COLUMNS)
ui.frame_block(bases, "Instance bases", "instance_bases")
