"""Energy: Tables 3 and 4 (J/100 tokens, ratio vs plain), Figure 2 (tokens per joule), power vs k, a power trace."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from dashboard import charts, queries, ui

TRACE_MARGIN_S = 1.0  # show a little idle power on either side of the generation


def trace(f: ui.Filters) -> None:
    """Pick one generation and plot the power samples within its [started_at, ended_at]."""
    gens = f.apply(queries.generations(f.url, f.exp_id)).sort_values("id")
    st.subheader("Power trace of one generation")
    if gens.empty:
        st.info("No generation in this selection.")
        return
    labels = {int(r.id): f"#{r.id} {r.strategy} {r.task} k={r.k} {r.regime} prompt {r.prompt_index}"
              for r in gens.itertuples()}
    gen_id = st.selectbox("Generation", list(labels), format_func=labels.get, key="energy_gen")
    row = gens[gens["id"] == gen_id].iloc[0]
    t0, t1 = float(row["started_at"]), float(row["ended_at"])
    samples = queries.power(f.url, f.exp_id, t0 - TRACE_MARGIN_S, t1 + TRACE_MARGIN_S)
    label = ui.power_label(gens[gens["id"] == gen_id])
    cols = st.columns(4)
    cols[0].metric("energy (J)", "–" if pd.isna(row["energy_j"]) else f"{row['energy_j']:.2f}")
    cols[1].metric("mean power (W)", "–" if pd.isna(row["mean_power_w"]) else f"{row['mean_power_w']:.1f}")
    cols[2].metric("wall (s)", f"{row['wall_s']:.3f}")
    cols[3].metric("started", dt.datetime.fromtimestamp(t0).strftime("%H:%M:%S"))
    if samples.empty:
        st.info(f"No power samples within this generation's window ({label}).")
        return
    st.plotly_chart(charts.power_trace(samples, t0, t1, label))


f = ui.current_filters()
st.title("Energy")
summary = f.apply(queries.summary(f.url, f.experiment))
label = ui.power_label(summary)
st.caption(f"Energy is the power trace integrated over each generation's window. Source: **{label}**.")
ui.paper_table_block(summary, "table3")
ui.paper_table_block(summary, "table4")
if summary["tokens_per_j"].notna().any():
    st.plotly_chart(charts.tokens_per_joule_ladder(summary, label))
    st.plotly_chart(charts.power_vs_k(summary, label))
else:
    st.info("No energy figures for this selection: no power source covered these generations.")
trace(f)
