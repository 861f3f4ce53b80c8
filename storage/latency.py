"""Draft latency rows (`greenspec latency SPEC`), stored per experiment name for the dashboard's paper page.

Self-contained: its own table (`draft_latency`, migration 0004) keyed by the experiment's *name*, so a latency
measurement can be stored before or without a sweep of that spec. Storing again replaces the experiment's rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import asdict, is_dataclass

import pandas as pd
from sqlalchemy import DateTime, Float, Integer, String, delete, inspect, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from storage.models import Base, utcnow

LATENCY_COLUMNS = [
    "experiment",
    "strategy",
    "draft",
    "engine",
    "queries",
    "prompts",
    "repeats",
    "mean_us",
    "median_us",
    "p95_us",
    "min_us",
    "host",
    "measured_at",
]


class DraftLatency(Base):
    """One strategy's standalone next-token latency (one engine), over `queries` single-token proposals."""

    __tablename__ = "draft_latency"

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment: Mapped[str] = mapped_column(String(200), index=True)
    strategy: Mapped[str] = mapped_column(String(100))
    draft: Mapped[str] = mapped_column(String(32))
    engine: Mapped[str] = mapped_column(String(32))
    queries: Mapped[int] = mapped_column(Integer)
    prompts: Mapped[int] = mapped_column(Integer)
    repeats: Mapped[int] = mapped_column(Integer)
    mean_us: Mapped[float] = mapped_column(Float)
    median_us: Mapped[float] = mapped_column(Float)
    p95_us: Mapped[float] = mapped_column(Float)
    min_us: Mapped[float] = mapped_column(Float)
    host: Mapped[str | None] = mapped_column(String(200))
    measured_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


def store_latency(
    session: Session, experiment: str, rows: Iterable, *, prompts: int, repeats: int, host: str | None = None
) -> int:
    """Replace the experiment's latency rows by `rows` (dataclasses or dicts with the row fields); returns the count."""
    session.execute(delete(DraftLatency).where(DraftLatency.experiment == experiment))
    n = 0
    for r in rows:
        d = asdict(r) if is_dataclass(r) else dict(r)
        session.add(
            DraftLatency(
                experiment=experiment,
                prompts=prompts,
                repeats=repeats,
                host=host,
                **{
                    k: d[k]
                    for k in ("strategy", "draft", "engine", "queries", "mean_us", "median_us", "p95_us", "min_us")
                },
            )
        )
        n += 1
    return n


def latency_frame(session: Session, experiment: str) -> pd.DataFrame:
    """The experiment's latency rows (empty when none was measured, or the database predates the table)."""
    if not inspect(session.get_bind()).has_table(DraftLatency.__tablename__):
        return pd.DataFrame(columns=LATENCY_COLUMNS)  # readers never migrate
    cols = [getattr(DraftLatency, c) for c in LATENCY_COLUMNS]
    rows = session.execute(select(*cols).where(DraftLatency.experiment == experiment).order_by(DraftLatency.id)).all()
    return pd.DataFrame(rows, columns=LATENCY_COLUMNS)
