"""Reads for browsing one experiment: its data version, DISTINCT options, one generation by its grid coordinates,
accepted-length counts and the texts Table 5 needs. Only what a page shows is fetched; sessions come from the caller.

Example:
    >>> version = data_version(s, exp_id)                      # (last generation id, count): changes with new results
    >>> distinct_values(s, exp_id, "task", {"strategy": "my-strategy"})
    ['pubmed', 'wikitext']
    >>> gen_id = generation_id(s, exp_id, GridPoint("my-strategy", "pubmed", 3, "cached", 0))
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from storage.db import DatabaseError, foreign_tables, has_schema, sqlite_path
from storage.models import Experiment, Reference
from storage.models import Generation as G
from storage.summary import PLAIN

logger = logging.getLogger(__name__)

PICK_ORDER = ("strategy", "task", "k", "regime", "prompt_index")  # the cascading pickers' order


@dataclass(frozen=True)
class Selection:
    """A filter over generations; empty tuples mean "all". The k filter never drops plain (it is the reference)."""

    tasks: tuple[str, ...] = ()
    strategies: tuple[str, ...] = ()
    regimes: tuple[str, ...] = ()
    ks: tuple[int, ...] = ()
    temperature: float | None = None  # one temperature at a time (None: all)

    def where(self, stmt):
        """`stmt` restricted to this selection."""
        if self.temperature is not None:
            stmt = stmt.where(G.temperature == self.temperature)
        for column, chosen in ((G.task, self.tasks), (G.strategy, self.strategies), (G.regime, self.regimes)):
            if chosen:
                stmt = stmt.where(column.in_(chosen))
        if self.ks:
            stmt = stmt.where(G.k.in_(self.ks) | (G.draft == PLAIN))
        return stmt

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """Which rows of `df` (one per grid coordinate: a stored summary's, `accepted_length_table`'s) are in this
        selection, as `where` selects generations."""
        keep = pd.Series(True, index=df.index)
        if self.temperature is not None:
            keep &= df["temperature"] == self.temperature
        for column, chosen in (("task", self.tasks), ("strategy", self.strategies), ("regime", self.regimes)):
            if chosen:
                keep &= df[column].isin(chosen)
        if self.ks:
            keep &= df["k"].isin(self.ks) | (df["draft"] == PLAIN)
        return keep


@dataclass(frozen=True)
class GridPoint:
    """One generation's coordinates in the grid."""

    strategy: str
    task: str
    k: int
    regime: str
    prompt_index: int
    temperature: float | None = None  # the sidebar's one temperature (None: any; the newest then)


def data_version(session: Session, exp_id: int) -> tuple[int, int]:
    """(largest generation id, generation count) of an experiment: changes exactly when results are added."""
    last, count = session.execute(select(func.max(G.id), func.count()).where(G.experiment_id == exp_id)).one()
    return int(last or 0), int(count or 0)


def distinct_values(
    session: Session, exp_id: int, column: str, fixed: dict[str, Any] | None = None, selection: Selection = Selection()
) -> list:
    """Sorted DISTINCT values of generations' `column`, where the `fixed` columns equal their values."""
    col = getattr(G, column)
    stmt = selection.where(select(col).distinct().where(G.experiment_id == exp_id))
    for name, value in (fixed or {}).items():
        stmt = stmt.where(getattr(G, name) == value)
    return sorted(v for v in session.scalars(stmt) if v is not None)


def distinct_in(rows: pd.DataFrame, column: str, fixed: dict[str, Any], selection: Selection = Selection()) -> list:
    """`distinct_values` read off `rows`, one per grid coordinate that has a generation (a stored summary's): the
    same values, with no scan of the generations."""
    rows = rows[selection.mask(rows)]
    for name, value in fixed.items():
        rows = rows[rows[name] == value]
    return sorted(rows[column].dropna().unique().tolist())


def generation_id(session: Session, exp_id: int, point: GridPoint) -> int | None:
    """The id of the generation at `point` (the newest if a cell was somehow stored twice)."""
    stmt = select(func.max(G.id)).where(
        G.experiment_id == exp_id,
        G.strategy == point.strategy,
        G.task == point.task,
        G.k == point.k,
        G.regime == point.regime,
        G.prompt_index == point.prompt_index,
    )
    if point.temperature is not None:
        stmt = stmt.where(G.temperature == point.temperature)
    return session.scalar(stmt)


def generation_detail(session: Session, gen_id: int) -> dict | None:
    """One generation in full (tokens, per-round records, text, window) as a plain dict."""
    row = session.execute(select(G.__table__).where(G.id == gen_id)).mappings().first()
    return dict(row) if row is not None else None


def reference(session: Session, exp_id: int, task: str, prompt_index: int) -> dict | None:
    """The greedy reference of one prompt: prompt text and continuation."""
    stmt = select(Reference.prompt_text, Reference.text, Reference.tokens).where(
        Reference.experiment_id == exp_id, Reference.task == task, Reference.prompt_index == prompt_index
    )
    row = session.execute(stmt.limit(1)).mappings().first()
    return dict(row) if row is not None else None


ACCEPTED_KEYS = ["strategy", "draft", "task", "k", "regime", "temperature"]  # the summary index's order


def accepted_length_table(session: Session, exp_id: int, selection: Selection = Selection()) -> pd.DataFrame:
    """Rounds that accepted 0..K draft tokens (columns h0..hK, K the largest k drafted) per strategy x draft x task x
    k x regime x temperature of the drafted generations in `selection` (one SQL query, in the summary index's
    order); `accepted_length_counts` sums it over the sidebar's selection."""
    cols = [getattr(G, c) for c in ACCEPTED_KEYS]
    drafted = (G.experiment_id == exp_id, G.draft != PLAIN, G.k > 0)
    top = session.scalar(selection.where(select(func.max(G.k)).where(*drafted))) or 0
    bins = [func.sum(G.accept_hist[j].as_integer()).label(f"h{j}") for j in range(top + 1)]
    result = session.execute(selection.where(select(*cols, *bins).where(*drafted)).group_by(*cols))
    return pd.DataFrame(result.all(), columns=[*ACCEPTED_KEYS, *(f"h{j}" for j in range(top + 1))])


def accepted_length_counts(
    session: Session | None, exp_id: int, max_k: int, selection: Selection = Selection(), table=None
) -> pd.DataFrame:
    """Rounds that accepted 0..k draft tokens, summed over generations per strategy x k: the selection's rows of
    `table` (`accepted_length_table`, read here when None)."""
    if max_k <= 0:
        return pd.DataFrame(columns=["strategy", "k", "accepted", "rounds"])
    df = accepted_length_table(session, exp_id, selection) if table is None else table
    df = df[selection.mask(df)]
    bins = [f"h{j}" for j in range(max_k + 1) if f"h{j}" in df]
    wide = df.groupby(["strategy", "k"], sort=False)[bins].sum(min_count=1).reset_index()
    long = wide.melt(id_vars=["strategy", "k"], var_name="bin", value_name="rounds")
    long["accepted"] = long["bin"].str[1:].astype(int)
    long = long[long["accepted"] <= long["k"]].fillna({"rounds": 0})
    long["rounds"] = long["rounds"].astype(int)
    return (
        long[["strategy", "k", "accepted", "rounds"]].sort_values(["k", "strategy", "accepted"]).reset_index(drop=True)
    )


def redundancy_texts(session: Session, exp_id: int) -> pd.DataFrame:
    """One generated text per strategy x task x prompt (greedy texts repeat across k and regime), for Table 5."""
    first = (
        select(func.min(G.id).label("id"))
        .where(G.experiment_id == exp_id)
        .group_by(G.strategy, G.task, G.prompt_index)
        .subquery()
    )
    stmt = select(G.strategy, G.task, G.prompt_index, G.text).join(first, G.id == first.c.id)
    return pd.DataFrame(session.execute(stmt).all(), columns=["strategy", "task", "prompt_index", "text"])


def references_frame(session: Session, exp_id: int) -> pd.DataFrame:
    """Every greedy reference of an experiment: task, prompt, prompt text, continuation."""
    cols = [Reference.task, Reference.prompt_index, Reference.prompt_text, Reference.text]
    rows = session.execute(select(*cols).where(Reference.experiment_id == exp_id)).all()
    return pd.DataFrame(rows, columns=["task", "prompt_index", "prompt_text", "text"])


def reference_tokens_frame(session: Session, exp_id: int) -> pd.DataFrame:
    """Every reference continuation of an experiment: task, prompt_index, tokens (verifier ids), text."""
    cols = ["task", "prompt_index", "tokens", "text"]
    rows = session.execute(
        select(*(getattr(Reference, c) for c in cols))
        .where(Reference.experiment_id == exp_id)
        .order_by(Reference.task, Reference.prompt_index)
    ).all()
    return pd.DataFrame(rows, columns=cols)


def spec_toml(session: Session, exp_id: int) -> str:
    """The experiment's stored spec text ("" when absent)."""
    return session.scalar(select(Experiment.spec_toml).where(Experiment.id == exp_id)) or ""


def database_state(url: str, sessions) -> str:
    """ "missing" (no file), "no_schema", "empty" (no experiment yet) or "ready"; `sessions()` gives a session factory.

    A missing SQLite file is reported before anything connects, so a reader never creates an empty database.
    """
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        return "missing"
    try:
        factory = sessions()
        if not has_schema(factory.kw["bind"]):
            return "no_schema"
        with factory() as s:
            return "ready" if s.scalar(select(Experiment.id).limit(1)) is not None else "empty"
    except (SQLAlchemyError, DatabaseError) as err:  # unreadable, or another program's database
        logger.warning("database %s unreadable: %s", url, err)
        return "no_schema"


def database_problem(url: str, sessions) -> str | None:
    """One line naming the database and what is wrong with it: not a SQLite file (or a damaged one), or another
    program's tables; None for a readable greenspec database, an empty one or a missing file (the start page's)."""
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        return None
    name = str(path) if path is not None else url
    try:
        problem = foreign_tables(sessions().kw["bind"])
    except (SQLAlchemyError, DatabaseError) as err:
        first = str(getattr(err, "orig", None) or err).splitlines()[0][:200]
        kind = "not a SQLite database" if path is not None else "cannot be read"
        return f"{name}: {kind} ({first})"
    return f"{name}: {problem}; give another --db" if problem else None
