"""Shared page pieces: the sidebar filters, table blocks with CSV/LaTeX downloads, the start page."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import tables
from analysis.columns import BOUNDS, Column
from dashboard import charts, reads
from storage.browse import PICK_ORDER, GridPoint, Selection

FILTERS_KEY = "gs_filters"
START_POLL_S = 5  # the start page checks this often whether a run has begun


@dataclass(frozen=True)
class Filters:
    """The sidebar's choices: the experiment, its data version, the selection and the aggregation."""

    url: str
    experiment: str
    exp_id: int
    version: tuple[int, int] = (0, 0)
    selection: Selection = field(default_factory=Selection)
    pooled: bool = False

    @property
    def tasks(self) -> tuple[str, ...]:
        return self.selection.tasks

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        """Rows of `df` within the selection (plain rows kept for any k: they are the reference)."""
        sel = self.selection
        if sel.temperature is not None and "temperature" in df:
            df = df[df["temperature"] == sel.temperature]
        return tables.filter_frame(df, sel.tasks, sel.strategies, sel.regimes, sel.ks)

    def summary(self) -> pd.DataFrame:
        """The experiment's summary (cached by data version) within the selection."""
        return self.apply(reads.summary(self.url, self.exp_id, self.version, self.pooled))


def sidebar_filters(url: str) -> Filters:
    """Draw the filters in the sidebar (entrypoint, so they persist across pages) and remember them."""
    exps = reads.experiments(url)
    with st.sidebar:
        st.header("Filters")
        name = st.selectbox("Experiment", list(exps["name"]), key="f_experiment")
        exp_id = int(exps.loc[exps["name"] == name, "id"].iloc[0])
        data = reads.version(url, exp_id)
        opts = reads.options(url, exp_id, data)
        tasks = st.multiselect("Task", opts["task"], key="f_task", placeholder="all tasks")
        strategies = st.multiselect("Strategy", opts["strategy"], key="f_strategy", placeholder="all strategies")
        regimes = st.multiselect("Regime", opts["regime"], key="f_regime", placeholder="every regime")
        ks = st.multiselect("k", [k for k in opts["k"] if k > 0], key="f_k", placeholder="every k")
        temps = opts.get("temperature") or [0.0]
        temperature = (
            st.selectbox(
                "Temperature", temps, key="f_temperature", format_func=temperature_label, help=TEMPERATURE_HELP
            )
            if len(temps) > 1
            else temps[0]
        )
        pooled = st.toggle("Pooled (sum / sum)", key="f_pooled", help=AGGREGATION_HELP)
        st.caption(f"Database: `{url}` · {data[1]:,} generations")
    selection = Selection(
        tuple(tasks), tuple(strategies), tuple(regimes), tuple(int(k) for k in ks), float(temperature)
    )
    found = Filters(url, name, exp_id, data, selection, bool(pooled))
    st.session_state[FILTERS_KEY] = found
    return found


TEMPERATURE_HELP = (
    "0 is greedy decoding. Above 0 the verifier samples (speculative sampling keeps its distribution "
    "exactly): acceptance, MAL, speed and energy are shown; ROUGE-L and exact match against the "
    "greedy reference are left empty, since a sampled text is not meant to equal it."
)


def temperature_label(t: float) -> str:
    """How a temperature reads in the sidebar."""
    return "0 (greedy)" if t == 0 else f"{t:g} (sampled)"


AGGREGATION_HELP = (
    "Off (the paper's way): each rate is computed per generation, then averaged over the prompts. "
    "On: ratios of sums over the cell (total tokens / total seconds, ...)."
)


def reading_note(f: Filters) -> str:
    """The note under a page's title while its reads run (a first view over 10^5 generations takes seconds)."""
    return f"Reading {f.version[1]:,} generations of **{f.experiment}**…"


def read_note(f: Filters, seconds: float) -> str:
    """The note once the page has rendered: what it read, and how long that took."""
    return f"{f.version[1]:,} generations of **{f.experiment}** · read in {seconds:.1f} s"


def remembered_filters() -> Filters | None:
    """The filters the entrypoint drew in this run, if it ran."""
    return st.session_state.get(FILTERS_KEY)


def forget_filters() -> None:
    """Drop this run's filters once its page has rendered (they are redrawn from the widgets every run)."""
    st.session_state.pop(FILTERS_KEY, None)


PICK_LABELS = {"strategy": "Strategy", "task": "Task", "k": "k", "regime": "Regime", "prompt_index": "Prompt"}


def generation_picker(f: Filters, key: str) -> int | None:
    """Cascading pickers strategy -> task -> k -> regime -> prompt (DISTINCT options); the chosen generation's id."""
    fixed: dict[str, object] = {}
    for col, column in zip(st.columns(len(PICK_ORDER)), PICK_ORDER):
        opts = reads.distinct(f.url, f.exp_id, f.version, column, tuple(fixed.items()), f.selection)
        if not opts:
            return None
        first = next((i for i, v in enumerate(opts) if v != tables.PLAIN), 0) if column == "strategy" else 0
        fixed[column] = col.selectbox(PICK_LABELS[column], opts, index=first, key=f"{key}_{column}")
    return reads.generation_id(f.url, f.exp_id, f.version, GridPoint(**fixed, temperature=f.selection.temperature))


def slug(text: str) -> str:
    """A file-name-safe slug."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "table"


@st.cache_data(max_entries=64, show_spinner=False)
def paper_table(f: Filters, key: str) -> pd.DataFrame:
    """One of the paper's tables over the filters' summary, pivoted once per data version and selection."""
    spec = tables.PAPER_TABLES[key]
    return tables.paper_table(tables.paper_rows(f.summary(), key), spec.metrics, spec.regime)


def paper_table_block(f: Filters, key: str) -> pd.DataFrame:
    """Render one of the paper's tables (bold best per task) with CSV and LaTeX downloads; returns it."""
    spec = tables.PAPER_TABLES[key]
    return metric_table_block(paper_table(f, key), spec.title, spec.metrics, key)


def metric_table_block(table: pd.DataFrame, title: str, metrics, key: str) -> pd.DataFrame:
    """Render a pivoted metric table with bold bests and its downloads."""
    st.subheader(title)
    if table.empty:
        st.info("No rows for this selection yet.")
        return table
    st.table(tables.styled(table, metrics), hide_index=True)
    downloads(
        key, lambda: tables.to_csv(table), lambda: tables.to_latex(table, metrics, caption=title, label=f"tab:{key}")
    )
    return table


def frame_block(df: pd.DataFrame, title: str, key: str, empty: str = "Nothing here yet.", **dataframe_args) -> None:
    """Render a plain DataFrame (interactive) with CSV and LaTeX downloads; `empty` is shown when it has no rows."""
    st.subheader(title)
    if df.empty:
        st.info(empty)
        return
    st.dataframe(tables.one_type_per_column(df), hide_index=True, **dataframe_args)
    downloads(
        key,
        lambda: df.to_csv(index=False),
        lambda: df.to_latex(index=False, float_format="%.3f", escape=True, caption=title, label=f"tab:{key}"),
    )


def column_formats(columns: tuple[Column, ...], shown: list[str]) -> dict:
    """Streamlit's header and number format of each `shown` column that declares one in `analysis.columns` (an
    interval bound as "<label> 95% lo"), for `st.dataframe(column_config=...)`."""
    out = {}
    for c in columns:
        names = {c.name: c.label, **{c.bound(b): c.label and f"{c.label} 95% {b}" for b in BOUNDS}}
        for name, label in names.items():
            if name not in shown:
                continue
            if c.fmt:
                out[name] = st.column_config.NumberColumn(label, format=c.fmt)
            elif label:
                out[name] = label
    return out


def downloads(key: str, csv, latex) -> None:
    """CSV and LaTeX download buttons side by side; `csv` and `latex` are text or callables run only on a click."""
    left, right, _ = st.columns([1, 1, 10])
    left.download_button("CSV", csv, file_name=f"{slug(key)}.csv", mime="text/csv", key=f"dl_csv_{key}")
    right.download_button("LaTeX", latex, file_name=f"{slug(key)}.tex", mime="text/x-tex", key=f"dl_tex_{key}")


def power_label(df: pd.DataFrame) -> str:
    """ "measured (nvml)", "estimated (estimate)", "mixed ..." or "no energy data" for a frame's rows."""
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
    url = reads.db_url()
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


def problem_page() -> None:
    """The page shown for a database greenspec cannot read: one line naming the file and what is wrong, no traceback."""
    url = reads.db_url()
    st.title("greenspec")
    st.error(reads.db_problem(url) or f"`{url}` cannot be read.")
    st.caption("Point the dashboard at a greenspec database: `greenspec --db URL dashboard`.")


def _wait_for_results(url: str) -> None:
    """Switch to the result pages as soon as the first experiment lands."""
    if reads.db_state(url) == "ready":
        st.rerun()


def show_chart(figure: dict) -> None:
    """Draw a figure cached as a dict (validated when it was built; rebuilding it validated costs ~0.2 s)."""
    st.plotly_chart(go.Figure(figure, _validate=False))


@st.cache_data(max_entries=64, show_spinner=False)
def summary_chart(name: str, f: Filters, *args) -> dict:
    """`charts.<name>(summary, *args)` over the filters' summary, built once per data version and selection."""
    return getattr(charts, name)(f.summary(), *args).to_dict()


@st.cache_data(max_entries=16, show_spinner=False)
def accepted_length_chart(f: Filters, max_k: int) -> dict:
    """The accepted-length histogram over the filters' selection, built once per data version and selection."""
    counts = reads.accepted_lengths(f.url, f.exp_id, f.version, max_k, f.selection)
    return charts.accepted_length_hist(counts).to_dict()


def aggregation_label(f: Filters) -> str:
    """How the page's numbers are aggregated, in words."""
    return "pooled: ratios of sums over each cell" if f.pooled else "per-prompt means, as the paper"
