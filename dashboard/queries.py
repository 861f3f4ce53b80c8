"""All of the dashboard's SQL: storage's engine and query functions, cached with a short TTL, read-only.

Every cached function takes the database URL first, so two dashboards on two databases never share a cache.
"""

from __future__ import annotations

import logging
import os
import tomllib

import pandas as pd
import streamlit as st
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from dashboard.launch import DB_ENV
from storage import queries as sq
from storage.db import DEFAULT_URL, has_schema, open_db, sqlite_path
from storage.models import Experiment, Generation, Reference

logger = logging.getLogger(__name__)

TTL_S = 5  # results arrive every few seconds during a sweep; older data would look stale
LIVE_TTL_S = 2

TEXT_COLUMNS = ["id", "strategy", "draft", "task", "k", "regime", "prompt_index", "text"]


def db_url() -> str:
    """The database the dashboard reads: `$GREENSPEC_DB`, else greenspec's default."""
    return os.environ.get(DB_ENV) or DEFAULT_URL


@st.cache_resource
def _factory(url: str) -> tuple[Engine, sessionmaker]:
    """One engine per URL for the server's lifetime (never migrates: the dashboard only reads)."""
    return open_db(url, migrate=False)


def _session(url: str) -> Session:
    return _factory(url)[1]()


def db_state(url: str) -> str:
    """"missing" (no file), "no_schema", "empty" (no experiment yet), or "ready"."""
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        return "missing"  # don't let SQLite create an empty file on connect
    try:
        if not has_schema(_factory(url)[0]):
            return "no_schema"
        with _session(url) as s:
            return "ready" if sq.experiment_id(s, None) is not None else "empty"
    except SQLAlchemyError as err:
        logger.warning("database %s unreadable: %s", url, err)
        return "no_schema"


@st.cache_data(ttl=TTL_S)
def experiments(url: str) -> pd.DataFrame:
    """Every experiment with its cell counts by state, newest first."""
    with _session(url) as s:
        return sq.experiments_frame(s).sort_values("id", ascending=False).reset_index(drop=True)


@st.cache_data(ttl=LIVE_TTL_S)
def status(url: str, experiment: str) -> dict:
    """Cell counts by kind and state for one experiment (the queue progress)."""
    with _session(url) as s:
        return sq.status_counts(s, experiment)


@st.cache_data(ttl=TTL_S)
def failures(url: str, exp_id: int) -> pd.DataFrame:
    """Failed cells of one experiment with their errors."""
    with _session(url) as s:
        return sq.failures_frame(s, exp_id)


@st.cache_data(ttl=TTL_S)
def instance_bases(url: str, exp_id: int) -> pd.DataFrame:
    """Instance bases of one experiment."""
    with _session(url) as s:
        return sq.instance_bases_frame(s, exp_id)


@st.cache_data(ttl=TTL_S)
def generations(url: str, exp_id: int) -> pd.DataFrame:
    """Per-generation metrics (no texts) of one experiment."""
    with _session(url) as s:
        return sq.generations_frame(s, exp_id)


@st.cache_data(ttl=TTL_S)
def summary(url: str, experiment: str) -> pd.DataFrame:
    """One row per strategy x task x k x regime with speedup and energy ratio vs plain."""
    with _session(url) as s:
        return sq.summary_frame(s, experiment)


@st.cache_data(ttl=TTL_S)
def power(url: str, exp_id: int, t0: float | None = None, t1: float | None = None) -> pd.DataFrame:
    """Raw power samples of one experiment within [t0, t1] (epoch seconds)."""
    with _session(url) as s:
        return sq.power_frame(s, exp_id, t0, t1)


@st.cache_data(ttl=TTL_S)
def texts(url: str, exp_id: int) -> pd.DataFrame:
    """Generated texts of one experiment with their grid coordinates."""
    cols = [getattr(Generation, c) for c in TEXT_COLUMNS]
    with _session(url) as s:
        rows = s.execute(select(*cols).where(Generation.experiment_id == exp_id).order_by(Generation.id)).all()
    return pd.DataFrame(rows, columns=TEXT_COLUMNS)


@st.cache_data(ttl=TTL_S)
def references(url: str, exp_id: int) -> pd.DataFrame:
    """Plain-greedy reference continuations of one experiment, per task and prompt."""
    cols = ["task", "prompt_index", "prompt_text", "text"]
    with _session(url) as s:
        rows = s.execute(select(*(getattr(Reference, c) for c in cols))
                         .where(Reference.experiment_id == exp_id)).all()
    return pd.DataFrame(rows, columns=cols)


@st.cache_data(ttl=TTL_S)
def generation(url: str, gen_id: int) -> dict | None:
    """One generation in full (tokens, steps, text, window) as a plain dict."""
    with _session(url) as s:
        gen = s.get(Generation, gen_id)
        if gen is None:
            return None
        return {c.name: getattr(gen, c.name) for c in Generation.__table__.columns}


@st.cache_data(ttl=60)
def spec(url: str, exp_id: int) -> dict:
    """The experiment's spec as parsed TOML ({} when it does not parse)."""
    with _session(url) as s:
        text = s.scalar(select(Experiment.spec_toml).where(Experiment.id == exp_id))
    try:
        return tomllib.loads(text or "")
    except tomllib.TOMLDecodeError:
        logger.warning("experiment %s: spec_toml does not parse", exp_id)
        return {}
