"""Cost model: the verifier's measured pass cost against the tokens a pass feeds (the paper's section 5.1), per
device and regime, and the per-token acceptance a draft of n tokens needs to pay for its longer pass; `k = "auto"`
chooses each round's length from these curves."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from dashboard import ui
from dashboard.app import page_filters
from workers.costcurve import curve_dir, load_curves

page_filters()
st.title("Cost model")
curves = load_curves()
st.caption(
    f"Pass cost c(n) of a verifier pass over n draft tokens, measured once per verifier, device and regime "
    f"after the prompt that first needed it (3 rounds over the lengths; c(n) is the Theil-Sen line through them, "
    f"the median per length beside it; files in {curve_dir()}). Break-even: the "
    "per-token acceptance a at which a chain of n yields as many tokens per second as plain decoding, "
    "(1 + a + ... + a^n) / c(n) = 1 / c(0)."
)
if not curves:
    st.info('No pass-cost curve measured yet: a strategy with k = "auto" measures one for its verifier and regime.')
else:
    rows = [
        {
            "verifier": c.verifier,
            "device": c.device,
            "regime": c.regime,
            "n": n,
            "pass_ms": s * 1e3,
            "measured_ms": c.measured[n] * 1e3 if n < len(c.measured) else None,
            "relative": s / c.seconds[0],
            "break_even": c.break_even(n) if n else None,
        }
        for c in curves
        for n, s in enumerate(c.seconds)
    ]
    df = pd.DataFrame(rows)
    df["curve"] = df["regime"] + " · " + df["device"] + " · " + df["verifier"].str.rsplit("/", n=1).str[-1]
    fig = px.line(
        df,
        x="n",
        y="relative",
        color="curve",
        markers=True,
        labels={"n": "draft tokens per pass", "relative": "pass cost / one-token pass"},
    )
    ui.show_chart(fig.to_dict())
    ui.frame_block(
        df.drop(columns=["curve"]),
        "Pass cost and break-even acceptance",
        "pass_costs",
        column_config={
            "pass_ms": st.column_config.NumberColumn("c(n) (ms, fitted line)", format="%.1f"),
            "measured_ms": st.column_config.NumberColumn("median pass (ms)", format="%.1f"),
            "relative": st.column_config.NumberColumn("c(n) / c(0)", format="%.2f"),
            "break_even": st.column_config.NumberColumn("break-even acceptance", format="percent"),
        },
    )
