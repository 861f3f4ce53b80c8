"""Compare: this experiment beside another one in the same database, cell by cell (`greenspec.compare`, what
`greenspec export --compare NAME` writes): both figures with their 95% intervals, B - A, and whether the intervals
miss each other. Read-only; the whole experiments (the sidebar's selection does not apply)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import reads, ui
from dashboard.app import page_filters
from greenspec.frames import compare_experiments

FORMATS = {
    **{
        f"{f}_{s}": st.column_config.NumberColumn(f"{f} ({s})", format="%.3f")
        for f in ("speedup", "acceptance")
        for s in ("a", "b", "diff")
    },
    "apart": st.column_config.CheckboxColumn("intervals apart"),
}


@st.cache_data(max_entries=reads.ENTRIES, show_spinner=False)
def compared(url: str, a: str, b: str, data: tuple) -> pd.DataFrame:
    """The two experiments side by side, once per data version of the first."""
    with reads._session(url) as s:
        return compare_experiments(s, a, b)


def show(f) -> None:
    """The page: pick the other experiment, then the cells both ran."""
    others = [n for n in reads.experiments(f.url)["name"] if n != f.experiment]
    if not others:
        st.info(
            f"Only **{f.experiment}** is stored in this database: run another spec (or `greenspec costs repredict`) "
            "to compare with."
        )
        return
    other = st.selectbox("Compare with", others, key="compare_with")
    frame = compared(f.url, f.experiment, other, f.version)
    st.caption(
        f"A = **{f.experiment}**, B = **{other}**: {len(frame)} cells both ran; {frame.attrs.get('only_a', 0)} only "
        f"in A, {frame.attrs.get('only_b', 0)} only in B. Differences are B - A; two runs' prompts are not paired, so "
        f"no interval of a difference is claimed. The same table: `greenspec export -e {f.experiment} --compare "
        f"{other}`."
    )
    shown = [c for c in frame.columns if not c.endswith(("_lo", "_hi")) and c not in ("a", "b")]
    ui.frame_block(frame[shown], "Cells both ran", "compare", empty="No cell ran in both.", column_config=FORMATS)


show(page_filters())
