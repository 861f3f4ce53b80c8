"""Throughput: Tables 1 and 2 (tokens/s and speedup over plain per regime) and Figure 1 (speedup vs k)."""

from __future__ import annotations

import streamlit as st

from dashboard import ui
from dashboard.app import page_filters

f = page_filters()
summary = f.summary()
st.caption(
    "Speedup is tokens/s over plain's tokens/s at the same task and regime "
    f"({ui.aggregation_label(f)}); the best per task is bold."
)
ui.paper_table_block(f, "table1")
ui.paper_table_block(f, "table2")
if summary[summary["draft"] != "plain"]["speedup"].notna().any():
    ui.show_chart(ui.summary_chart("speedup_vs_k", f))
else:
    st.info("Figure 1 needs a drafted strategy and plain at the same task and regime.")
