"""Acceptance: Tables 6 and 7 (acceptance, first-token acceptance, MAL), the break-even k/(k+1), accepted lengths, and
the learning curve (acceptance against the base's size) where a draft ran on bases of several sizes."""

from __future__ import annotations

import streamlit as st

from analysis import tables
from dashboard import charts, reads, ui
from dashboard.app import page_filters

f = page_filters()
summary = f.summary()
st.caption(
    "Acceptance = accepted / drafted tokens; first-token acceptance = rounds whose first draft token was "
    "accepted / rounds with a draft (cached: 1 - fast-path rejects / rounds with a draft); MAL = accepted draft "
    f"tokens per verification round (a fast-path reject is a round, the cached prefill is not). "
    f"{ui.aggregation_label(f).capitalize()}."
)
ui.paper_table_block(f, "table6")
ui.paper_table_block(f, "table7")

even = tables.break_even_frame(summary)
if even.empty:
    st.info("No drafted strategy in this selection.")
else:
    ui.show_chart(ui.summary_chart("acceptance_vs_k", f))
    ui.frame_block(
        even,
        "Break-even acceptance k/(k+1)",
        "break_even",
        column_config={
            "acceptance": st.column_config.NumberColumn(format="percent"),
            "first_token_acceptance": st.column_config.NumberColumn("first-token acceptance", format="percent"),
            "break_even": st.column_config.NumberColumn("break-even", format="percent"),
            "margin": st.column_config.NumberColumn(format="percent"),
            "speedup": st.column_config.NumberColumn(format="%.2fx"),
        },
    )
    ui.show_chart(ui.accepted_length_chart(f, int(even["k"].max())))

curve_k = 5
points, slopes = reads.learning_curve(f.url, f.exp_id, f.version, curve_k)
if not points.empty:
    ui.show_chart(charts.learning_curve_chart(points, curve_k))
    ui.frame_block(
        slopes,
        f"Learning curve: pooled acceptance gained per decade of tokens (k = {curve_k}, paired 95% interval over "
        "prompts) and whether a line fits the sizes (curvature per decade squared: it bends where the interval "
        "excludes 0)",
        "learning_curve",
    )
