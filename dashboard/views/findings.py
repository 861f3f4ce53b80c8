"""Findings: the seed paper's claims and the future-work, tree and auto-k targets this experiment's grid can answer,
each with its verdict, and those it cannot with the reason (`greenspec.findings`, what `greenspec findings` prints).
Read-only; the whole experiment (the sidebar's selection does not apply: a verdict is about its family)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.stats import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, TIE
from dashboard import reads, ui
from dashboard.app import page_filters
from greenspec.findings import RULES, SECTIONS, read_findings, tally

SHOWN = ["verdict", "target", "task", "regime", "k", "estimate", "lo", "hi", "prompts", "family", "correction"]
FORMATS = {
    "estimate": st.column_config.NumberColumn("estimate", format="%.3f"),
    "lo": st.column_config.NumberColumn("95% lo", format="%.3f"),
    "hi": st.column_config.NumberColumn("95% hi", format="%.3f"),
    "reason": st.column_config.TextColumn("why inconclusive", width="medium"),
    "detail": st.column_config.TextColumn("numbers", width="large"),
}


@st.cache_data(max_entries=reads.ENTRIES, show_spinner=False)
def findings(url: str, experiment: str, data: tuple) -> pd.DataFrame:
    """The experiment's findings, once per data version (the checks bootstrap over prompts: seconds)."""
    with reads._session(url) as s:
        return read_findings(s, experiment)


def section(part: pd.DataFrame, title: str, key: str) -> None:
    """One section's verdicts as a table, the claims it cannot answer as a list."""
    judged, gaps = part[part["verdict"] != NOT_TESTABLE], part[part["verdict"] == NOT_TESTABLE]
    ui.frame_block(
        judged[[*SHOWN, "reason", "detail"]],
        title,
        key,
        empty="No verdict: nothing in this section can be read off this grid.",
        column_config=FORMATS,
    )
    if len(gaps):
        st.markdown("**Not testable here**\n" + "\n".join(f"- {r.target}: {r.reason}" for r in gaps.itertuples()))


f = page_filters()
frame = findings(f.url, f.experiment, f.version)
st.caption(
    f"Experiment **{f.experiment}**, every cell (the sidebar's selection does not apply): {tally(frame)}. Rules: "
    f"{RULES}. The same table: `greenspec findings --experiment {f.experiment}`."
)
counts = frame["verdict"].value_counts()
for col, verdict in zip(st.columns(5), (HOLDS, FAILS, TIE, INCONCLUSIVE, NOT_TESTABLE)):
    col.metric(verdict, int(counts.get(verdict, 0)))
errors = frame.attrs.get("model_error", {})
if errors:
    known = ", ".join(f"{r} {'unknown' if e != e else f'{e:.1%}'}" for r, e in errors.items())
    st.caption(
        f"Model error of replayed speeds (the spread of each regime's validated width-band errors), added to the "
        f"margin of every paired comparison and to the break-even; a cell's own interval holds its band's: {known}."
    )
for i, name in enumerate(SECTIONS):
    part = frame[frame["section"] == name]
    if len(part):
        section(part, name[0].upper() + name[1:], f"findings_{i}")
