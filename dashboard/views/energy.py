"""Energy: Tables 3 and 4 (J/100 tokens, ratio plain ÷ strategy), Figure 2 (tokens per joule), power vs k, a trace."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from dashboard import charts, reads, ui
from dashboard.app import page_filters

TRACE_MARGIN_S = 1.0  # show a little idle power on either side of the generation


def _value(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    return "–" if value is None or pd.isna(value) else fmt.format(value)


def trace(f: ui.Filters) -> None:
    """Pick one generation (cascading pickers) and plot the power samples within its [started_at, ended_at]."""
    st.subheader("Power trace of one generation")
    gen_id = ui.generation_picker(f, "energy")
    gen = reads.generation(f.url, gen_id) if gen_id is not None else None
    if gen is None:
        st.info("No generation in this selection.")
        return
    t0, t1 = float(gen["started_at"]), float(gen["ended_at"])
    samples = reads.power(f.url, f.exp_id, t0 - TRACE_MARGIN_S, t1 + TRACE_MARGIN_S)
    label = ui.power_label(
        pd.DataFrame([{"power_measured": gen["power_measured"], "power_source": gen["power_source"]}])
    )
    cols = st.columns(4)
    cols[0].metric("energy (J)", _value(gen, "energy_j", "{:.2f}"))
    cols[1].metric("mean power (W)", _value(gen, "mean_power_w", "{:.1f}"))
    cols[2].metric("wall (s)", f"{gen['wall_s']:.3f}")
    cols[3].metric("started", dt.datetime.fromtimestamp(t0).strftime("%H:%M:%S"))
    if samples.empty:
        st.info(f"No power samples within this generation's window ({label}).")
        return
    st.plotly_chart(charts.power_trace(samples, t0, t1, label))


f = page_filters()
summary = f.summary()
label = ui.power_label(summary)
st.caption(
    f"Energy is the power trace integrated over each generation's window. Source: **{label}**. "
    f"Energy ratio = plain's J/100 tokens ÷ the strategy's (higher is better; the paper's Table 3). "
    f"{ui.aggregation_label(f).capitalize()}."
)
ui.paper_table_block(f, "table3")
ui.paper_table_block(f, "table4")
if summary["tokens_per_j"].notna().any():
    ui.show_chart(ui.summary_chart("tokens_per_joule_ladder", f, label))
    ui.show_chart(ui.summary_chart("power_vs_k", f, label))
else:
    st.info("No energy figures for this selection: no power source covered these generations.")
trace(f)
