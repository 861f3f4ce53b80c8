"""Shared page pieces: the sidebar filters, table blocks with CSV/LaTeX downloads, the start page."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st

from dashboard import queries, tables

FILTERS_KEY = "gs_filters"
START_POLL_S = 5  # the start page checks this often whether a run has begun


@dataclass(frozen=True)
class Filters:
    """The sidebar's selection; empty tuples mean "all"."""

    url: str
    experiment: str
    exp_id: int
    tasks: tuple[str, ...] = ()
    strategies: tuple[str, ...] = ()
    regimes: tuple[str, ...] = ()
    ks: tuple[int, ...] = field(default=())

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        """Rows of `df` within the selection (plain rows kept for any k: they are the reference)."""
        return tables.filter_frame(df, self.tasks, self.strategies, self.regimes, self.ks)


def sidebar_filters(url: str) -> Filters:
    """Draw the filters in the sidebar (entrypoint, so they persist across pages) and remember them."""
    exps = queries.experiments(url)
    with st.sidebar:
        st.header("Filters")
        name = st.selectbox("Experiment", list(exps["name"]), key="f_experiment")
        exp_id = int(exps.loc[exps["name"] == name, "id"].iloc[0])
        gens = queries.generations(url, exp_id)
        tasks = st.multiselect("Task", _options(gens, "task"), key="f_task", placeholder="all tasks")
        strategies = st.multiselect("Strategy", _options(gens, "strategy"), key="f_strategy",
                                    placeholder="all strategies")
        regimes = st.multiselect("Regime", _options(gens, "regime"), key="f_regime", placeholder="both regimes")
        ks = st.multiselect("k", [k for k in _options(gens, "k") if k > 0], key="f_k", placeholder="every k")
        st.caption(f"Database: `{url}`")
    found = Filters(url, name, exp_id, tuple(tasks), tuple(strategies), tuple(regimes), tuple(int(k) for k in ks))
    st.session_state[FILTERS_KEY] = found
    return found


def current_filters() -> Filters:
    """The filters the entrypoint drew in this run.

    Where a `pages/` folder sits beside the entry, Streamlit runs a requested page on its own until the first
    `st.navigation` call of the process (a page opened by URL on a fresh server; every AppTest run). Then no
    filters exist yet in this run: run the entrypoint, which renders this page properly, and stop this run.
    """
    found = st.session_state.get(FILTERS_KEY)
    if found is not None:
        return found
    from dashboard.app import main

    main()
    st.stop()


def forget_filters() -> None:
    """Drop this run's filters once its page has rendered (they are redrawn from the widgets every run)."""
    st.session_state.pop(FILTERS_KEY, None)


def _options(df: pd.DataFrame, column: str) -> list:
    return sorted(df[column].dropna().unique().tolist()) if column in df else []


def slug(text: str) -> str:
    """A file-name-safe slug."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "table"


def paper_table_block(summary: pd.DataFrame, key: str) -> pd.DataFrame:
    """Render one of the paper's tables (bold best per task) with CSV and LaTeX downloads; returns it."""
    spec = tables.PAPER_TABLES[key]
    rows = summary if spec.plain else summary[summary["draft"] != tables.PLAIN]
    table = tables.paper_table(rows, spec.metrics, spec.regime)
    return metric_table_block(table, spec.title, spec.metrics, key)


def metric_table_block(table: pd.DataFrame, title: str, metrics, key: str) -> pd.DataFrame:
    """Render a pivoted metric table with bold bests and its downloads."""
    st.subheader(title)
    if table.empty:
        st.info("No rows for this selection yet.")
        return table
    st.table(tables.styled(table, metrics), hide_index=True)
    downloads(key, tables.to_csv(table), tables.to_latex(table, metrics, caption=title, label=f"tab:{key}"))
    return table


def frame_block(df: pd.DataFrame, title: str, key: str, empty: str = "Nothing here yet.", **dataframe_args) -> None:
    """Render a plain DataFrame (interactive) with CSV and LaTeX downloads; `empty` is shown when it has no rows."""
    st.subheader(title)
    if df.empty:
        st.info(empty)
        return
    st.dataframe(df, hide_index=True, **dataframe_args)
    latex = df.to_latex(index=False, float_format="%.3f", escape=True, caption=title, label=f"tab:{key}")
    downloads(key, df.to_csv(index=False), latex)


def downloads(key: str, csv: str, latex: str) -> None:
    """CSV and LaTeX download buttons side by side."""
    left, right, _ = st.columns([1, 1, 10])
    left.download_button("CSV", csv, file_name=f"{slug(key)}.csv", mime="text/csv", key=f"dl_csv_{key}")
    right.download_button("LaTeX", latex, file_name=f"{slug(key)}.tex", mime="text/x-tex", key=f"dl_tex_{key}")


def power_label(df: pd.DataFrame) -> str:
    """"measured (nvml)", "estimated (estimate)", "mixed ..." or "no energy data" for a frame's rows."""
    if df.empty or "power_measured" not in df or df["power_measured"].isna().all():
        return "no energy data"
    measured = df["power_measured"].dropna().astype(bool)
    sources = ", ".join(sorted(df["power_source"].dropna().astype(str).unique())) if "power_source" in df else ""
    if measured.all():
        return f"measured ({sources})"
    if not measured.any():
        return f"estimated ({sources})"
    return f"mixed: some measured, some estimated ({sources})"


def start_page() -> None:
    """The friendly page shown while the database holds no results."""
    url = queries.db_url()
    st.title("greenspec")
    st.info(f"No results in `{url}` yet.")
    st.markdown(
        "Start a run, then come back: this page fills in as results arrive.\n\n"
        "```bash\n"
        "greenspec demo                          # a small end-to-end sweep on this machine\n"
        "greenspec run examples/demo.toml        # or run a spec of your own\n"
        "```\n\n"
        f"The dashboard reads the database named by `GREENSPEC_DB` (now `{url}`); "
        "point it elsewhere with `greenspec --db URL dashboard`."
    )
    st.fragment(run_every=START_POLL_S)(_wait_for_results)(url)


def _wait_for_results(url: str) -> None:
    """Switch to the result pages as soon as the first experiment lands."""
    if queries.db_state(url) == "ready":
        st.rerun()
