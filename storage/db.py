"""Engine setup and schema migrations (Alembic) for any SQLAlchemy URL; SQLite gets WAL and a busy timeout."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session as Session  # re-exported: the type callers outside storage/ annotate with
from sqlalchemy.orm import sessionmaker

from workers.errors import GreenspecError

logger = logging.getLogger(__name__)

DEFAULT_URL = "sqlite:///greenspec.db"
BUSY_TIMEOUT_MS = 30_000  # readers (dashboard) and the one writer (driver) wait instead of failing
MIGRATIONS = Path(__file__).parent / "migrations"


class DatabaseError(GreenspecError):
    """The database URL is malformed or the database cannot be opened."""


def make_engine(url: str = DEFAULT_URL, *, readonly: bool = False) -> Engine:
    """An engine for `url`; for SQLite: WAL journal, busy timeout, foreign keys on."""
    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise DatabaseError(f"--db {url!r}: not a SQLAlchemy URL (e.g. sqlite:///greenspec.db)") from err
    is_sqlite = parsed.get_backend_name() == "sqlite"
    kwargs = {"connect_args": {"timeout": BUSY_TIMEOUT_MS / 1000}} if is_sqlite else {"pool_pre_ping": True}
    engine = create_engine(parsed, **kwargs)
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")  # safe with WAL: a crash loses no committed transaction
    cur.close()


def sqlite_path(url: str) -> Path | None:
    """The file behind a sqlite URL (None for other backends or in-memory)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (creates it on an empty database)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def open_db(url: str = DEFAULT_URL, *, migrate: bool = True) -> tuple[Engine, sessionmaker]:
    """Engine and session factory; `migrate` upgrades the schema first (the driver's job)."""
    engine = make_engine(url)
    if migrate:
        upgrade(engine)
    return engine, sessionmaker(engine, expire_on_commit=False)


def has_schema(engine: Engine) -> bool:
    """Whether the database already holds greenspec's tables (readers check before querying)."""
    from sqlalchemy import inspect

    return inspect(engine).has_table("cells")


def open_reader(url: str = DEFAULT_URL) -> sessionmaker | None:
    """A session factory for reading; None when the database does not exist or has no greenspec schema yet."""
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return None
    engine = make_engine(url)
    return sessionmaker(engine) if has_schema(engine) else None
