"""Cost model: the experiment's measured round-cost table from the database (seconds of a real round per regime and
width over context, the table's monotone line through the measured medians), the per-token acceptance a draft of n
tokens needs in each regime to pay for its longer round, and how well the table predicts: timed against replayed
generations, per regime and width band, beside the run's own timing noise."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from dashboard import reads, ui
from dashboard.app import page_filters
from storage.validation import curve_frame, table_frame

MAX_LEN = 8  # draft lengths shown in the break-even table


def table_chart(frame: pd.DataFrame) -> dict:
    """Milliseconds of a round against context, one line per regime and width (chains and trees; opening passes
    apart), the measured medians as points on the table's monotone line."""
    rounds = frame[~frame["kind"].str.contains("first")].assign(row=lambda d: d["kind"] + " n=" + d["n"].astype(str))
    fig = px.line(
        rounds,
        x="context",
        y="table_ms",
        color="row",
        facet_col="regime",
        markers=True,
        hover_data=["median_ms", "min_ms", "max_ms", "rounds"],
        labels={"context": "context (tokens)", "table_ms": "round (ms)", "row": "pass"},
    )
    fig.update_layout(legend_title_text="pass width")
    return fig.to_dict()


def table_section(stored) -> None:
    """The measured table: what it was measured on, its rounds against context, the break-even table."""
    t = stored.table
    meta = ", ".join(f"{k} {v}" for k, v in t.meta.items())
    noise = ", ".join(f"{r} {v:.1%}" for r, v in sorted(t.noise.items()))
    energy = ""
    if stored.energy_j is not None and stored.mean_power_w is not None:
        energy = f", {stored.energy_j:.1f} J at {stored.mean_power_w:.1f} W mean ({stored.power_source})"
    st.caption(
        f"**{t.verifier}** on **{t.device}** ({meta}): measured on the accelerator worker, {stored.measured()}, "
        f"in the real decoding loop{energy}; the repeats' own spread (median "
        f"|round / its median - 1|): {noise or 'one repeat'}. A replayed generation is predicted as the table's "
        "seconds for each of its rounds (interpolated over context, monotone) plus its draft's own seconds."
    )
    frame = table_frame(stored)
    ui.show_chart(table_chart(frame))
    ui.frame_block(
        frame,
        "Measured rounds and the table",
        "round_table",
        column_config={
            "median_ms": st.column_config.NumberColumn("median round (ms)", format="%.2f"),
            "table_ms": st.column_config.NumberColumn("table (ms)", format="%.2f"),
            "min_ms": st.column_config.NumberColumn("fastest (ms)", format="%.2f"),
            "max_ms": st.column_config.NumberColumn("slowest (ms)", format="%.2f"),
        },
    )
    contexts = sorted(frame["context"].unique())
    context = int(contexts[len(contexts) // 2]) if contexts else 64
    st.caption(
        f"Break-even after {context} tokens: the per-token acceptance a at which a chain of n yields as many tokens "
        "per second as plain decoding, (1 + a + ... + a^n) / c(n) = 1 / c(0)."
    )
    ui.frame_block(
        curve_frame(t, context, MAX_LEN),
        "Round cost and break-even acceptance",
        "pass_costs",
        column_config={
            "round_ms": st.column_config.NumberColumn("c(n) (ms)", format="%.2f"),
            "relative": st.column_config.NumberColumn("c(n) / c(0)", format="%.2f"),
            "break_even": st.column_config.NumberColumn("break-even acceptance", format="percent"),
        },
    )


f = page_filters()
stored = reads.cost_model(f.url, f.exp_id)
if stored is None:
    st.info(
        "No round-cost table measured for this experiment: a cost model cell measures one on the accelerator worker "
        "before replayed generations are predicted."
    )
else:
    table_section(stored)
ui.frame_block(
    reads.prediction_error(f.url, f.exp_id, f.version),
    "Prediction error per regime and width band",
    "prediction_error",
    empty="No generation was both timed and replayed.",
    column_config={
        "pairs": st.column_config.NumberColumn("timed + replayed", help="generations both timed and replayed"),
        "median_error": st.column_config.NumberColumn("median |pred / meas - 1|", format="percent"),
        "p90_error": st.column_config.NumberColumn("p90", format="percent"),
        "bias": st.column_config.NumberColumn("median pred / meas - 1", format="percent", help="> 0: too fast"),
        "paced_error": st.column_config.NumberColumn(
            "at the table's pace", format="percent", help="median error, each timing set at the table's pace"
        ),
        "drift": st.column_config.NumberColumn(
            "drift", format="percent", help="median |machine's pace at the timing / at the table - 1|"
        ),
        "noise": st.column_config.NumberColumn(
            "timing noise", format="percent", help="generations timed twice: median |t2 / t1 - 1| / sqrt(2)"
        ),
        "noise_pairs": st.column_config.NumberColumn("timed twice"),
        "table_error": st.column_config.NumberColumn(
            "table's own error", format="percent", help="sqrt(median error^2 - noise^2): what the noise leaves"
        ),
        "within_noise": st.column_config.TextColumn(
            "within noise",
            help="yes: the table's own error <= timing noise and |bias| <= 3%; else no where the pairs show the miss "
            "(95% bootstrap interval), unresolved where too few pairs to tell (or under 3 a side)",
        ),
        "coordinates": st.column_config.NumberColumn("speedups ranked", help="coordinates with >= 3 timed prompts"),
        "spearman": st.column_config.NumberColumn("Spearman (timed vs replayed)", format="%.2f"),
    },
)
