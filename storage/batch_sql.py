"""The statements the driver runs for every batch of cells, handed to the database driver as they are.

A replayed study stores hundreds of cells a second through one driver; SQLAlchemy's compile-and-bind path costs
about a millisecond a statement over what SQLite itself spends on it (measured: marking 64 cells running, 2.0 ms
through the ORM, 0.8 ms as plain SQL). These few statements are written once as SQL with `?` marks, turned into the
driver's own marks (SQLite's `?`, psycopg's `%s`), their values bound as each column's type binds them (a SQLite
datetime as its text), and run with the connection of the caller's session: the same transaction as the rest.

Example:
    >>> run(session, "UPDATE cells SET state = ? WHERE id IN ({ids})", ("done",), ids=[3, 4, 5])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache

from sqlalchemy import Column
from sqlalchemy.orm import Session

CHUNK = 500  # ids per IN list (SQLite allows 32,766 values a statement; PostgreSQL 65,535)
json_text = json.JSONEncoder().encode  # the text SQLAlchemy's JSON type writes (json.dumps' defaults), set up once
MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}  # the drivers' positional marks


def supported(session: Session) -> bool:
    """Whether this database's driver takes positional marks (SQLite's and PostgreSQL's do)."""
    return session.get_bind().dialect.paramstyle in MARKS


@lru_cache(maxsize=256)
def _sql(sql: str, style: str, n_ids: int) -> str:
    ids = ", ".join(["?"] * n_ids)
    return sql.format(ids=ids).replace("?", MARKS[style])


def run(session: Session, sql: str, params: Sequence = (), ids: Sequence[int] = ()) -> None:
    """One statement: `sql` with `?` marks and an optional `{ids}` (an IN list of `ids`, bound after `params`)."""
    conn = session.connection()
    conn.exec_driver_sql(_sql(sql, conn.dialect.paramstyle, len(ids)), (*params, *ids))


def run_many(session: Session, sql: str, rows: Sequence[Sequence]) -> None:
    """One statement over many rows of values (the driver's executemany)."""
    if rows:
        conn = session.connection()
        conn.exec_driver_sql(_sql(sql, conn.dialect.paramstyle, 0), rows)


def bound(session: Session, column: Column, value):
    """`value` as the column's type binds it on this database (what the ORM would have sent)."""
    dialect = session.get_bind().dialect
    process = column.type.dialect_impl(dialect).bind_processor(dialect)  # the dialect's own type (SQLite's DATETIME)
    return value if process is None or value is None else process(value)


def chunks(ids: Sequence[int], size: int = CHUNK) -> list[Sequence[int]]:
    """`ids` in slices of at most `size` (one IN list each)."""
    return [ids[i : i + size] for i in range(0, len(ids), size)]
