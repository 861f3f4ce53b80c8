"""Overview: experiments, queue progress by kind (training, reference, replay, timed...) and state, live while a run
is going; failures, instance bases."""

from __future__ import annotations

import streamlit as st

from analysis.columns import OVERVIEW_COLUMNS, SUMMARY
from dashboard import charts, reads, ui
from dashboard.app import page_filters
from greenspec.report import notes_and_tags
from greenspec.status import kind_groups
from storage.browse import spec_toml

REFRESH_S = 5  # how often the queue redraws while cells are pending or running

RESULT_COLUMNS = OVERVIEW_COLUMNS  # analysis.columns: the summary's columns the overview shows
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


def _states(c: dict) -> str:
    return f"{c['done']} done, {c['running']} running, {c['pending']} pending, {c['failed']} failed"


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
    cells = counts["cells"]
    total, finished = sum(cells.values()), cells["done"] + cells["failed"]
    metrics = [("cells", total), *((s, cells[s]) for s in ("done", "running", "failed")), ("generations", data[1])]
    for col, (label, value) in zip(st.columns(5), metrics):
        col.metric(label, value)
    groups = {g: c for g, c in kind_groups(counts).items() if sum(c.values())}
    st.progress(finished / total if total else 0.0, text=f"{finished}/{total} cells finished")
    st.markdown(" · ".join(f"**{g}** {_states(c)}" for g, c in groups.items()) or "No cells yet.")
    st.plotly_chart(charts.queue_progress(groups))
    if live(counts):
        st.caption(f"Run in progress: refreshing every {REFRESH_S} s.")
    results = f.apply(reads.summary(f.url, f.exp_id, data, f.pooled))
    ui.frame_block(results[RESULT_COLUMNS], "Results so far", "summary", column_config=RESULT_FORMATS)


@st.cache_data(max_entries=reads.ENTRIES, show_spinner=False)
def notes(url: str, exp_id: int) -> tuple[str, list[str]]:
    """The experiment's `[experiment] notes` and `tags` from its stored spec."""
    with reads._session(url) as s:
        return notes_and_tags(spec_toml(s, exp_id))


f = page_filters()
text, tags = notes(f.url, f.exp_id)
shown = "".join(f" `{t}`" for t in tags)
st.caption(
    f"Experiment **{f.experiment}**{shown} · {'pooled (sum / sum)' if f.pooled else 'per-prompt means (the paper)'}"
)
if text:
    st.info(text)
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
