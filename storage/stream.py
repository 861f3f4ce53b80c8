"""Reading many rows in bounded memory: a statement's rows in chunks through SQLAlchemy Core (no ORM rows; a
server-side cursor on PostgreSQL, SQLite's own stepping cursor), each chunk as a typed frame, column by column.

A chunk's columns are typed from the statement's SQL types, as pandas would infer them from the rows: text as
pandas' `str`, integers as int64 (float64 where a chunk holds a NULL, as pandas makes them), floats as float64 (NULL
as NaN), anything else as Python objects. `frame` joins the chunks of a whole read column by column, so a read of
10^6 rows never holds them as Python row tuples all at once; `chunks` gives the rows themselves, a chunk at a time.

Example:
    >>> for part in frames(session, select(G.strategy, G.n_tokens), chunk=50_000): ...   # doctest: +SKIP
    >>> df = frame(session, select(G.strategy, G.n_tokens))                               # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
from sqlalchemy import Float, Integer, String, Text
from sqlalchemy.orm import Session

CHUNK = 10_000  # rows per chunk: about 10 MiB as Python rows, under 2 MiB as typed columns
JOIN = 16  # a whole read's chunks joined every JOIN chunks


def _kind(sql_type) -> str:
    """ "text", "int", "float" or "object": how a column of this SQL type is typed (module doc)."""
    if isinstance(sql_type, (String, Text)):
        return "text"
    if isinstance(sql_type, Integer):
        return "int"
    if isinstance(sql_type, Float):
        return "float"
    return "object"


def _column(values: tuple, kind: str, memo: dict | None = None) -> np.ndarray:
    """One chunk's values of one column as a typed array (module doc); text through `memo`, so that a read holds
    one string object per distinct value, not one per row."""
    if kind == "int" and None not in values:
        return np.array(values, dtype=np.int64)
    if kind in ("int", "float"):
        return np.array(values, dtype=float)  # None becomes NaN
    out = np.empty(len(values), dtype=object)
    out[:] = values if memo is None else [memo.setdefault(v, v) for v in values]
    return out


def _typed(rows: list, names: list[str], kinds: list[str], memos: dict[str, dict]) -> dict[str, np.ndarray]:
    columns = list(zip(*rows)) if rows else [() for _ in names]
    return {name: _column(tuple(col), kind, memos.get(name)) for name, col, kind in zip(names, columns, kinds)}


def chunks(session: Session, stmt, chunk: int = CHUNK) -> Iterator[list]:
    """The statement's rows, `chunk` at a time, through the session's connection (Core rows: plain tuples, as the
    driver returns them)."""
    result = session.connection().execute(stmt.execution_options(yield_per=chunk))
    try:
        for part in result.partitions(chunk):
            yield part
    finally:
        result.close()


def frames(session: Session, stmt, chunk: int = CHUNK) -> Iterator[pd.DataFrame]:
    """The statement's rows as typed frames of at most `chunk` rows each (none for no rows)."""
    names = list(stmt.selected_columns.keys())
    kinds = [_kind(c.type) for c in stmt.selected_columns]
    for rows in chunks(session, stmt, chunk):
        yield pd.DataFrame(_typed(rows, names, kinds, {}))


def frame(session: Session, stmt, chunk: int = CHUNK) -> pd.DataFrame:
    """The statement's rows as one typed frame, read `chunk` rows at a time and joined column by column (every
    `JOIN` chunks as they come, so that few small arrays are ever alive at once: freed, they would hold the heap)."""
    names = list(stmt.selected_columns.keys())
    kinds = [_kind(c.type) for c in stmt.selected_columns]
    parts: dict[str, list[np.ndarray]] = {n: [_column((), kind)] for n, kind in zip(names, kinds)}
    memos: dict[str, dict] = {n: {} for n, kind in zip(names, kinds) if kind == "text"}
    for rows in chunks(session, stmt, chunk):
        for name, values in _typed(rows, names, kinds, memos).items():
            parts[name].append(values)
            if len(parts[name]) > JOIN:
                parts[name] = [np.concatenate(parts[name])]  # an int column with a NULL: float64, as pandas types it
    joined = {name: np.concatenate(parts.pop(name)) for name in names}
    return pd.DataFrame(joined, copy=False)  # text: pandas' str (a column of NULLs alone stays objects, as inferred)
