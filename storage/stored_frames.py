"""Frames computed from an experiment's rows, kept in the database (`stored_frames`) with the data version they were
computed at, so that a reader shows a stored one instead of computing it again only while nothing it was computed
from has changed.

Computing an experiment's summary with its intervals reads every counted generation and bootstraps every cell: at
10^6 generations, tens of seconds and a gigabyte. The run's driver stores it once, when the run ends
(`analysis.summary.store_summaries`, with the other frames the dashboard's pages read whole); every reader (the
dashboard, `greenspec export` and `report`, the library's `results()`) asks for it by name and by the version it
would compute it at, and computes it itself (as before) when none is stored at that version. A version names the
rows a frame is computed from (`rows_version`: the experiment's newest generation id and its count of generations,
which change whenever a generation is added, since none is ever deleted alone; its references likewise; its newest
round-cost table, whose pace the model error is set at) and what the caller adds (the spec's versions, the code that
computes it). Generations changed in place (`storage.repredict.repredict_in_place`) drop the
experiment's stored frames in the same transaction (`drop_frames`). Readers never write: a frame is stored by a writer
(the driver at a run's end), one row per experiment and name, replaced each time.

Frames travel as Parquet, which keeps every column's type, its values bit for bit, and `DataFrame.attrs`.

Example:
    >>> version = f"{rows_version(session, exp_id)}/{recipe}"
    >>> df = read_frame(session, exp_id, "summary", version)    # None unless stored at that version
    >>> write_frame(session, exp_id, "summary", version, df)     # the caller commits
"""

from __future__ import annotations

import io

import pandas as pd
from sqlalchemy import delete, func, inspect, select
from sqlalchemy.orm import Session

from storage.browse import data_version
from storage.models import CostModel, Reference, StoredFrame


def rows_version(session: Session, exp_id: int) -> str:
    """The version of the rows a summary of experiment `exp_id` reads: its newest generation id and count of
    generations, its newest reference and count of references, and its newest round-cost table (module doc)."""
    last, count = data_version(session, exp_id)
    refs = session.execute(select(func.max(Reference.id), func.count()).where(Reference.experiment_id == exp_id)).one()
    table = session.scalar(select(func.max(CostModel.id)).where(CostModel.experiment_id == exp_id))
    return f"g{last}.{count}.r{refs[0] or 0}.{refs[1]}.c{table or 0}"


def _has_table(session: Session) -> bool:
    """Whether the database has the table (a reader may open one no run has migrated to it yet)."""
    return inspect(session.connection()).has_table(StoredFrame.__tablename__)


def read_frame(session: Session, exp_id: int, name: str, version: str) -> pd.DataFrame | None:
    """The frame `name` of experiment `exp_id` stored at `version`; None when none is (or one of another version)."""
    if not _has_table(session):
        return None
    stmt = select(StoredFrame.frame).where(
        StoredFrame.experiment_id == exp_id, StoredFrame.name == name, StoredFrame.version == version
    )
    data = session.scalar(stmt)
    return None if data is None else pd.read_parquet(io.BytesIO(data))


def write_frame(session: Session, exp_id: int, name: str, version: str, df: pd.DataFrame) -> None:
    """Store `df` as the frame `name` of experiment `exp_id` at `version`, replacing the one stored before; the
    caller commits."""
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    session.execute(delete(StoredFrame).where(StoredFrame.experiment_id == exp_id, StoredFrame.name == name))
    session.add(StoredFrame(experiment_id=exp_id, name=name, version=version, frame=buf.getvalue()))
    session.flush()


def stored_versions(session: Session, exp_id: int) -> dict[str, str]:
    """The names of experiment `exp_id`'s stored frames with the version each was stored at."""
    if not _has_table(session):
        return {}
    stmt = select(StoredFrame.name, StoredFrame.version).where(StoredFrame.experiment_id == exp_id)
    return dict(session.execute(stmt).all())


def drop_frames(session: Session, exp_id: int) -> int:
    """Delete experiment `exp_id`'s stored frames (its rows changed in place, or it is deleted); how many. The
    caller commits."""
    res = session.execute(delete(StoredFrame).where(StoredFrame.experiment_id == exp_id))
    return res.rowcount or 0
