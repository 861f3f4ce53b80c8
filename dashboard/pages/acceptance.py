"""Acceptance: Tables 6 and 7 (acceptance % and MAL), the break-even acceptance k/(k+1), accepted lengths."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, queries, tables, ui

f = ui.current_filters()
st.title("Acceptance")
summary = f.apply(queries.summary(f.url, f.experiment))
st.caption("Acceptance = accepted / drafted tokens; MAL = accepted draft tokens per verifier step.")
ui.paper_table_block(summary, "table6")
ui.paper_table_block(summary, "table7")

even = tables.break_even_frame(summary)
if even.empty:
    st.info("No drafted strategy in this selection.")
else:
    st.plotly_chart(charts.acceptance_vs_k(summary))
    ui.frame_block(even, "Break-even acceptance k/(k+1)", "break_even", column_config={
        "acceptance": st.column_config.NumberColumn(format="percent"),
        "break_even": st.column_config.NumberColumn("break-even", format="percent"),
        "margin": st.column_config.NumberColumn(format="percent"),
        "speedup": st.column_config.NumberColumn(format="%.2fx")})
    gens = f.apply(queries.generations(f.url, f.exp_id))
    st.plotly_chart(charts.accepted_length_hist(gens))
