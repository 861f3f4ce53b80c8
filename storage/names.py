"""Names follow the spec: a cell's key hashes what determines its result, not the task, strategy or corpus name, so
a renamed task finds its cells done. Those cells, and every result row they made, are relabelled with the spec's
names, so the renamed task's results are listed under its new name (and its plain runs with it).

Example:
    >>> rename_cells(session, exp_id, cells)
    [Rename(field='task', old='wiki', new='wikitext', cells=24)]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from storage.cell_spec import CellSpec
from storage.models import Base, Cell

NAME_FIELDS = ("strategy", "task", "corpus")
_CHUNK = 500  # cell ids per UPDATE (SQLite bounds the parameters of one statement)


@dataclass(frozen=True)
class Rename:
    """Stored cells (and their result rows) whose `field` was `old` and is now the spec's `new`."""

    field: str
    old: str | None
    new: str
    cells: int

    def describe(self) -> str:
        """One line, e.g. "task 'wiki' is now 'wikitext' (24 stored cells relabelled)"."""
        return f"{self.field} {self.old!r} is now {self.new!r} ({self.cells} stored cells relabelled)"


def renames(session: Session, exp_id: int, cells: Iterable[CellSpec]) -> dict[tuple[str, str | None, str], list[int]]:
    """(field, old name, new name) -> ids of the stored cells the spec makes again under another name. Streams
    `cells` in chunks, each looked up by key (nothing to look up in an experiment with no stored cell)."""
    out: dict[tuple[str, str | None, str], list[int]] = {}
    if session.scalar(select(Cell.id).where(Cell.experiment_id == exp_id).limit(1)) is None:
        return out
    chunk: dict[str, CellSpec] = {}

    def look_up() -> None:
        rows = session.execute(
            select(Cell.id, Cell.key, *(getattr(Cell, f) for f in NAME_FIELDS)).where(
                Cell.experiment_id == exp_id, Cell.key.in_(list(chunk))
            )
        ).all()
        for row in rows:
            c = chunk[row.key]
            for field in NAME_FIELDS:
                old, new = getattr(row, field), getattr(c, field)
                if new is not None and old != new:
                    out.setdefault((field, old, new), []).append(row.id)
        chunk.clear()

    for c in cells:
        chunk[c.key] = c
        if len(chunk) >= _CHUNK:
            look_up()
    if chunk:
        look_up()
    return out


def rename_cells(session: Session, exp_id: int, cells: Iterable[CellSpec]) -> list[Rename]:
    """Relabel the stored cells the spec makes under other names, and the rows of every table that carries the name
    beside a `cell_id`; what was renamed. The caller commits."""
    changes = renames(session, exp_id, cells)
    tables = [t for t in Base.metadata.sorted_tables if "cell_id" in t.c]
    for (field, _old, new), ids in changes.items():
        for lo in range(0, len(ids), _CHUNK):
            chunk = ids[lo : lo + _CHUNK]
            session.execute(update(Cell).where(Cell.id.in_(chunk)).values({field: new}))
            for table in (t for t in tables if field in t.c):
                session.execute(update(table).where(table.c.cell_id.in_(chunk)).values({field: new}))
    return [Rename(field, old, new, len(ids)) for (field, old, new), ids in changes.items()]
