"""The dashboard's reads: Streamlit caching around `storage`'s query functions (no SQL here), read-only.

Results are cached by the experiment's *data version* (its last generation id and count, one indexed query per
render): a repeat render is a cache hit, and a running sweep's new results show on the next render. The queue and
the experiments list, which change without new result rows, are read live with a short time-to-live.
Every cached function takes the database URL first, so two dashboards on two databases never share a cache.
"""

from __future__ import annotations

import logging
import os
import tomllib

import pandas as pd
import streamlit as st

from analysis import stored
from analysis.model_error import error_bounds, with_model_error
from analysis.summary import stored_summary, summarize
from dashboard.launch import DB_ENV
from storage import browse, validation
from storage import queries as sq
from storage import summary as ssum
from storage.browse import GridPoint, Selection
from storage.db import DEFAULT_URL, reader_sessions

logger = logging.getLogger(__name__)

LIVE_TTL_S = 2  # queue counts: cheap index-only counts, read fresh while a run is going
ENTRIES = 8  # cached versions kept per function (a running sweep makes a new one every few seconds)
COORDINATES = ("strategy", "draft", "task", "k", "regime", "temperature", "measure")  # a summary row's keys

Version = tuple[int, int]


def db_url() -> str:
    """The database the dashboard reads: `$GREENSPEC_DB`, else greenspec's default."""
    return os.environ.get(DB_ENV) or DEFAULT_URL


@st.cache_resource
def _sessions(url: str):
    """One read-only session factory per URL for the server's lifetime: the dashboard never changes the database.

    Not called before `db_state` has seen the file (a reader never creates an empty database).
    """
    return reader_sessions(url)


def _session(url: str):
    return _sessions(url)()


def db_state(url: str) -> str:
    """ "missing" (no file), "no_schema", "empty" (no experiment yet), or "ready"."""
    return browse.database_state(url, lambda: _sessions(url))


def db_problem(url: str) -> str | None:
    """One line naming the database and what is wrong when it is not SQLite or not greenspec's; None otherwise."""
    return browse.database_problem(url, lambda: _sessions(url))


def version(url: str, exp_id: int) -> Version:
    """The experiment's data version (uncached: one indexed query)."""
    with _session(url) as s:
        return browse.data_version(s, exp_id)


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def experiments(url: str) -> pd.DataFrame:
    """Every experiment with its cell counts by state, newest first."""
    with _session(url) as s:
        return sq.experiments_frame(s).sort_values("id", ascending=False).reset_index(drop=True)


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def status(url: str, experiment: str) -> dict:
    """Cell counts by kind and state for one experiment (the queue progress)."""
    with _session(url) as s:
        return sq.status_counts(s, experiment)


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def failures(url: str, exp_id: int) -> pd.DataFrame:
    """Failed cells of one experiment with their errors."""
    with _session(url) as s:
        return sq.failures_frame(s, exp_id)


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def instance_bases(url: str, exp_id: int) -> pd.DataFrame:
    """Instance bases of one experiment."""
    with _session(url) as s:
        return sq.instance_bases_frame(s, exp_id)


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def _sums(url: str, exp_id: int, data: Version) -> pd.DataFrame:
    """The experiment's per-cell sums and means (one SQL GROUP BY) at data version `data`."""
    with _session(url) as s:
        return ssum.group_sums(s, exp_id)


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def _prompts(url: str, exp_id: int, data: Version) -> pd.DataFrame:
    """The experiment's per-generation figures with their plain partners (the intervals' input) at version `data`."""
    with _session(url) as s:
        return ssum.prompt_frame(s, exp_id)


@st.cache_data(max_entries=2 * ENTRIES, show_spinner=False)
def summary(url: str, exp_id: int, data: Version, pooled: bool = False) -> pd.DataFrame:
    """One row per strategy x task x k x regime x measure with speedup and energy ratio vs plain, each figure with
    its 95% interval over prompts (a replayed speed figure's with the cost table's validated error): the one the
    run stored at the experiment's current data version (`analysis.summary.store_summaries`), else computed here."""
    with _session(url) as s:
        kept = stored_summary(s, exp_id, pooled, None)
        if kept is not None:
            return kept
        bounds = error_bounds(validation.prediction_pairs(s, exp_id))
    return with_model_error(summarize(_sums(url, exp_id, data), _prompts(url, exp_id, data), pooled=pooled), bounds)


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def options(url: str, exp_id: int, data: Version) -> dict[str, list]:
    """The sidebar's filter options: DISTINCT tasks, strategies, regimes, k and temperatures; read off the stored
    summary where there is one (a row per grid coordinate that has a generation), else from the generations."""
    columns = ("task", "strategy", "regime", "k", "temperature")
    with _session(url) as s:
        rows = stored_summary(s, exp_id, False, None)
        if rows is None:
            return {c: browse.distinct_values(s, exp_id, c) for c in columns}
    return {c: browse.distinct_in(rows, c, {}) for c in columns}


@st.cache_data(max_entries=16 * ENTRIES, show_spinner=False)
def distinct(
    url: str, exp_id: int, data: Version, column: str, fixed: tuple[tuple[str, object], ...], selection: Selection
) -> list:
    """DISTINCT values of `column` given the picker's earlier choices `fixed` and the sidebar's selection: read off
    the stored summary for a grid coordinate's column where there is one, else from the generations."""
    with _session(url) as s:
        rows = stored_summary(s, exp_id, False, None) if column in COORDINATES else None
        if rows is None:
            return browse.distinct_values(s, exp_id, column, dict(fixed), selection)
    return browse.distinct_in(rows, column, dict(fixed), selection)


@st.cache_data(max_entries=64, show_spinner=False)
def generation_id(url: str, exp_id: int, data: Version, point: GridPoint) -> int | None:
    """The id of the generation at a grid point."""
    with _session(url) as s:
        return browse.generation_id(s, exp_id, point)


@st.cache_data(max_entries=64, show_spinner=False)
def generation(url: str, gen_id: int) -> dict | None:
    """One generation in full (a stored generation never changes)."""
    with _session(url) as s:
        return browse.generation_detail(s, gen_id)


@st.cache_data(max_entries=64, show_spinner=False)
def reference(url: str, exp_id: int, task: str, prompt_index: int) -> dict | None:
    """The greedy reference of one prompt."""
    with _session(url) as s:
        return browse.reference(s, exp_id, task, prompt_index)


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def _accepted_table(url: str, exp_id: int, data: Version) -> pd.DataFrame:
    """Rounds by accepted draft tokens per grid coordinate (`storage.browse.accepted_length_table`), at version
    `data`: the one the run stored, else summed in SQL."""
    with _session(url) as s:
        return stored.frame(s, exp_id, stored.ACCEPTED)


@st.cache_data(max_entries=4 * ENTRIES, show_spinner=False)
def accepted_lengths(url: str, exp_id: int, data: Version, max_k: int, selection: Selection) -> pd.DataFrame:
    """Rounds by accepted draft tokens per strategy x k over the selection."""
    return browse.accepted_length_counts(None, exp_id, max_k, selection, _accepted_table(url, exp_id, data))


def redundancy(url: str, exp_id: int) -> pd.DataFrame:
    """Table 5's measures per text source x task (one text per prompt and source): the one the run stored, else
    computed; uncached: see `views/texts.py`."""
    with _session(url) as s:
        return stored.frame(s, exp_id, stored.TABLE5)


@st.cache_data(max_entries=32, show_spinner=False)
def power(url: str, exp_id: int, t0: float | None = None, t1: float | None = None) -> pd.DataFrame:
    """Raw power samples of one experiment within [t0, t1] (epoch seconds)."""
    with _session(url) as s:
        return sq.power_frame(s, exp_id, t0, t1)


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def cost_model(url: str, exp_id: int) -> validation.StoredCostModel | None:
    """The experiment's newest measured round-cost table (read live: it is stored before any generation)."""
    with _session(url) as s:
        return validation.stored_cost_model(s, exp_id)


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def prediction_error(url: str, exp_id: int, data: Version) -> pd.DataFrame:
    """Per regime: the cost model's prediction error on generations both timed and replayed, at data version `data`."""
    with _session(url) as s:
        return stored.prediction_error(s, exp_id)  # the one the run stored at this data version, else computed


@st.cache_data(ttl=60, show_spinner=False)
def spec(url: str, exp_id: int) -> dict:
    """The experiment's spec as parsed TOML ({} when it does not parse)."""
    with _session(url) as s:
        text = browse.spec_toml(s, exp_id)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        logger.warning("experiment %s: spec_toml does not parse", exp_id)
        return {}


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def learning_curve(url: str, exp_id: int, data: Version, k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The learning curve at `k` (`analysis.curve`): one point per corpus strategy and regime (acceptance against its
    base's tokens, with its interval) and the slope per decade of each draft family; both empty without two sizes."""
    from analysis import curve

    with _session(url) as s:
        text = browse.spec_toml(s, exp_id)
        bases = sq.instance_bases_frame(s, exp_id)
    try:
        sizes = curve.corpus_sizes(text, dict(zip(bases["corpus"], bases["tokens"])))
    except tomllib.TOMLDecodeError:
        return pd.DataFrame(), pd.DataFrame()
    families = {}
    for family, tokens in sizes.values():
        families.setdefault(family, set()).add(tokens)
    sizes = {name: ft for name, ft in sizes.items() if len(families[ft[0]]) > 1}  # a curve needs two sizes
    if not sizes:
        return pd.DataFrame(), pd.DataFrame()
    prompts = _prompts(url, exp_id, data)
    prompts = prompts[prompts["version"] == "current"] if "version" in prompts else prompts
    return curve.curve_points(prompts, sizes, k), curve.curve_slopes(prompts, sizes, k)
