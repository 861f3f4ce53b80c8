"""Cost model: the experiment's measured pass-cost model c(fed, cached, kept) from the database (the fitted surface
with the measured passes as points), the per-token acceptance a draft of n tokens needs in each regime to pay for
its longer pass, and how well the model predicts: timed against replayed generations, per regime."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from dashboard import reads, ui
from dashboard.app import page_filters
from storage.costs import fit_frame, surface_frame
from workers.costmodel import FEATURES, regime_curve

REGIMES = ("uncached", "cached", "cached-standard")
MAX_LEN = 8  # draft lengths shown in the break-even table


def surface_chart(fit: pd.DataFrame, surface: pd.DataFrame) -> dict:
    """Fitted milliseconds against tokens fed (lines, one per cache length) over the measured medians (points)."""
    fig = px.line(surface, x="fed", y="fitted_ms", color="passes", labels={"fed": "tokens fed", "fitted_ms": "ms"})
    for trace in px.scatter(fit, x="fed", y="measured_ms", color="passes", hover_data=["kept"]).data:
        trace.update(showlegend=False, marker={"size": 7, "symbol": "circle-open"})
        fig.add_trace(go.Scatter(trace))
    fig.update_layout(xaxis_type="log", yaxis_title="pass (ms): fitted lines, measured medians as points")
    return fig.to_dict()


def break_even_frame(model, context: int) -> pd.DataFrame:
    """c(n) per regime after `context` tokens and the break-even per-token acceptance of a chain of n."""
    rows = []
    for regime in REGIMES:
        curve = regime_curve(model, regime, context, MAX_LEN)
        for n, s in enumerate(curve.seconds):
            rows.append(
                {
                    "regime": regime,
                    "n": n,
                    "pass_ms": s * 1e3,
                    "relative": s / curve.seconds[0],
                    "break_even": curve.break_even(n) if n else None,
                }
            )
    return pd.DataFrame(rows)


def model_section(stored) -> None:
    """The fitted model: its coefficients, the surface against the measured passes, the break-even table."""
    m = stored.model
    coef = ", ".join(f"{name} {m.coefficients.get(name, 0.0) * 1e3:.4g} ms" for name in FEATURES)
    energy = ""
    if stored.energy_j is not None and stored.mean_power_w is not None:
        energy = f", {stored.energy_j:.1f} J at {stored.mean_power_w:.1f} W mean ({stored.power_source})"
    st.caption(
        f"**{m.verifier}** on **{m.device}**: measured on the accelerator worker in {stored.measure_s:.1f} s over "
        f"{len(stored.samples)} timed passes{energy}. A pass costs intercept + fed x a + kept x b + "
        f"fed x (cached + fed) x c + cached x d (non-negative least squares on each shape's median): {coef}. "
        "Replayed generations are predicted as the sum over their passes plus their draft's seconds."
    )
    fit = fit_frame(stored)
    ui.show_chart(surface_chart(fit, surface_frame(stored)))
    ui.frame_block(
        fit,
        "Measured passes and the fit",
        "pass_fit",
        column_config={
            "measured_ms": st.column_config.NumberColumn("median pass (ms)", format="%.1f"),
            "fitted_ms": st.column_config.NumberColumn("fitted (ms)", format="%.1f"),
            "error": st.column_config.NumberColumn("|fitted / measured - 1|", format="percent"),
        },
    )
    cached = sorted(c for c in fit["cached"] if c > 0)
    context = int(cached[len(cached) // 2]) if cached else int(fit["fed"].max())
    st.caption(
        f"Break-even after {context} tokens: the per-token acceptance a at which a chain of n yields as many tokens "
        "per second as plain decoding, (1 + a + ... + a^n) / c(n) = 1 / c(0)."
    )
    ui.frame_block(
        break_even_frame(m, context),
        "Pass cost and break-even acceptance",
        "pass_costs",
        column_config={
            "pass_ms": st.column_config.NumberColumn("c(n) (ms)", format="%.1f"),
            "relative": st.column_config.NumberColumn("c(n) / c(0)", format="%.2f"),
            "break_even": st.column_config.NumberColumn("break-even acceptance", format="percent"),
        },
    )


f = page_filters()
stored = reads.cost_model(f.url, f.exp_id)
if stored is None:
    st.info(
        "No pass-cost model measured for this experiment: a cost model cell measures one on the accelerator worker "
        "before replayed generations are predicted."
    )
else:
    model_section(stored)
ui.frame_block(
    reads.prediction_error(f.url, f.exp_id, f.version),
    "Prediction error per regime",
    "prediction_error",
    empty="No generation was both timed and replayed, nor carries its own prediction.",
    column_config={
        "pairs": st.column_config.NumberColumn("timed + replayed", help="generations both timed and replayed"),
        "median_error": st.column_config.NumberColumn("median |pred / meas - 1|", format="percent"),
        "p90_error": st.column_config.NumberColumn("p90", format="percent"),
        "timed": st.column_config.NumberColumn("timed, own prediction"),
        "timed_median_error": st.column_config.NumberColumn("median (timed)", format="percent"),
        "timed_p90_error": st.column_config.NumberColumn("p90 (timed)", format="percent"),
        "coordinates": st.column_config.NumberColumn("speedups ranked"),
        "spearman": st.column_config.NumberColumn("Spearman (timed vs replayed)", format="%.2f"),
    },
)
