"""Engine setup and schema migrations (Alembic) for any SQLAlchemy URL; SQLite gets WAL and a busy timeout.

Readers (`open_reader`: `greenspec status/export`, the dashboard) get a read-only engine that never changes
the database: SQLite is opened with `mode=ro` (and `immutable=1` while no writer has a `-wal` file, so no
`-wal`/`-shm` file is ever created by a reader), PostgreSQL sessions are read-only transactions.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine
from sqlalchemy.engine.url import URL, make_url
from sqlalchemy.orm import Session as Session  # re-exported: the type callers outside storage/ annotate with
from sqlalchemy.orm import sessionmaker
from sqlalchemy.pool import NullPool

from workers.errors import GreenspecError

logger = logging.getLogger(__name__)

DEFAULT_URL = "sqlite:///greenspec.db"
BUSY_TIMEOUT_MS = 30_000  # readers (dashboard) and the one writer (driver) wait instead of failing
MIGRATIONS = Path(__file__).parent / "migrations"
MAX_PAGES_ENV = "GREENSPEC_FAULT_DB_MAX_PAGES"  # test seam: a SQLite file that fills up after N pages ("disk full")


class DatabaseError(GreenspecError):
    """The database URL is malformed or the database cannot be opened."""


def _parse(url: str) -> URL:
    """The parsed URL (plain `postgresql://` uses psycopg 3, the project's driver), or one line."""
    try:
        parsed = make_url(url)
    except (sa_exc.ArgumentError, ValueError) as err:
        raise DatabaseError(f"--db {url!r}: not a SQLAlchemy URL (e.g. sqlite:///greenspec.db)") from err
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def slash_hint(url: str, path: Path) -> str:
    """For a relative SQLite path, how to write the absolute one: sqlite:///tmp/x.db is ./tmp/x.db, and
    sqlite:////tmp/x.db is /tmp/x.db ("" for an absolute path)."""
    if path.is_absolute():
        return ""
    scheme = url.split("://", 1)[0]
    return f"; sqlite:/// takes a path relative to here, so for /{path} write {scheme}:////{path} (four slashes)"


def _check_sqlite_file(url: str, path: Path) -> None:
    """Refuse a SQLite path that is a folder or whose folder does not exist."""
    if path.is_dir():
        raise DatabaseError(f"--db {url!r}: {path} is a directory, not a database file")
    if not path.parent.is_dir():
        raise DatabaseError(f"--db {url!r}: folder {path.parent} does not exist{slash_hint(url, path)}")


def make_engine(url: str = DEFAULT_URL, *, readonly: bool = False) -> Engine:
    """An engine for `url`; SQLite: WAL, busy timeout, foreign keys (the writer) or read-only files (readers)."""
    parsed = _parse(url)
    backend = parsed.get_backend_name()
    path = sqlite_path(url)
    if path is not None:
        _check_sqlite_file(url, path)
    try:
        if backend == "sqlite" and readonly and path is not None:
            return create_engine("sqlite://", creator=lambda: _sqlite_reader(path), poolclass=NullPool)
        if backend == "sqlite":
            engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
            event.listen(engine, "connect", _sqlite_pragmas)
            return engine
        args = (
            {"connect_args": {"options": "-c default_transaction_read_only=on"}}
            if readonly and backend == "postgresql"
            else {}
        )
        return create_engine(parsed, pool_pre_ping=True, **args)
    except sa_exc.NoSuchModuleError as err:
        raise DatabaseError(
            f"--db {url!r}: unknown database scheme {parsed.drivername!r} "
            "(use sqlite:///FILE or postgresql://USER@HOST/DB)"
        ) from err
    except ImportError as err:
        raise DatabaseError(f"--db {url!r}: the database driver is not installed ({err.name or err})") from err


def _sqlite_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection that creates no file: `immutable` while no writer keeps a `-wal` file beside it."""
    wal = Path(f"{path}-wal")
    # Without a -wal file there is no writer mid-transaction; immutable stops SQLite creating -wal/-shm itself.
    # With one, the writer's -shm exists too and plain mode=ro reads its snapshot through it.
    flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    conn = sqlite3.connect(
        f"file:{quote(str(path.resolve()))}?{flags}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")  # safe with WAL: a crash loses no committed transaction
    if pages := os.environ.get(MAX_PAGES_ENV):
        cur.execute(f"PRAGMA max_page_count={int(pages)}")
    cur.close()


def sqlite_path(url: str) -> Path | None:
    """The file behind a sqlite URL (None for other backends or in-memory)."""
    parsed = _parse(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (creates it on an empty database)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    migrating = _transactional_sqlite(engine) if engine.dialect.name == "sqlite" else engine
    try:
        with migrating.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    finally:
        if migrating is not engine:
            migrating.dispose()


def _transactional_sqlite(engine: Engine) -> Engine:
    """A SQLite engine whose transactions really enclose DDL, so a migration lands whole or not at all.

    pysqlite begins a transaction only before INSERT/UPDATE/DELETE: a CREATE TABLE runs in autocommit, and a
    driver killed part-way through creating a new database left tables without Alembic's version stamp (the
    next run then failed with "table experiments already exists"). Here the driver's own transaction handling
    is off and every transaction is an explicit BEGIN IMMEDIATE (SQLAlchemy's documented recipe), which also
    makes two drivers migrating one new file at once take turns instead of both creating tables.
    """
    migrating = create_engine(engine.url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000}, poolclass=NullPool)

    def autocommit_driver(dbapi_conn, record) -> None:
        dbapi_conn.isolation_level = None
        _sqlite_pragmas(dbapi_conn, record)

    event.listen(migrating, "connect", autocommit_driver)
    event.listen(migrating, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    return migrating


def open_db(url: str = DEFAULT_URL, *, migrate: bool = True) -> tuple[Engine, sessionmaker]:
    """Engine and session factory; `migrate` upgrades the schema first (the driver's job)."""
    engine = make_engine(url)
    with guard(url, "opening"):
        if migrate:
            upgrade(engine)
        else:
            engine.connect().close()
    return engine, sessionmaker(engine, expire_on_commit=False)


GREENSPEC_TABLES = frozenset({"alembic_version", "experiments", "cells", "generations"})


def foreign_tables(engine: Engine) -> str | None:
    """What is wrong when the database holds tables but not greenspec's ("not a greenspec database (its tables:
    ...)"); None when it holds greenspec's tables or none at all."""
    from sqlalchemy import inspect

    tables = set(inspect(engine).get_table_names())
    if not tables or GREENSPEC_TABLES <= tables:
        return None
    shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    return f"not a greenspec database (its tables: {shown})"


def has_schema(engine: Engine) -> bool:
    """Whether the database already holds greenspec's tables (readers check before querying); a database with
    other tables (another program's, even one with a `cells` table) is refused in one line."""
    from sqlalchemy import inspect

    if problem := foreign_tables(engine):
        raise DatabaseError(f"{engine.url.render_as_string(hide_password=True)}: {problem}; give another --db")
    return bool(inspect(engine).get_table_names())


def reader_engine(url: str = DEFAULT_URL) -> Engine | None:
    """A read-only engine (what the dashboard should read through); None when there is no database file yet."""
    path = sqlite_path(url)
    if path is not None:
        _check_sqlite_file(url, path)  # a folder that does not exist is a typo, not "no results yet"
        if not path.exists():
            return None
    return make_engine(url, readonly=True)


def reader_sessions(url: str = DEFAULT_URL) -> sessionmaker:
    """A read-only session factory for a long-lived reader (the dashboard), which checks the schema itself."""
    engine = reader_engine(url)
    if engine is None:
        raise DatabaseError(f"--db {url!r}: no database file yet")
    return sessionmaker(engine)


def open_reader(url: str = DEFAULT_URL) -> sessionmaker | None:
    """A read-only session factory; None when the database does not exist or has no greenspec schema yet."""
    engine = reader_engine(url)
    if engine is None:
        return None
    with guard(url, "reading"):
        return sessionmaker(engine) if has_schema(engine) else None


def _is_disk_full(err: BaseException) -> bool:
    orig = getattr(err, "orig", None) or err
    text = str(orig).lower()
    return (
        (isinstance(orig, OSError) and orig.errno == errno.ENOSPC)
        or "disk is full" in text
        or "no space left" in text
        or "could not extend file" in text
    )


@contextmanager
def guard(url: str, doing: str = "storing") -> Iterator[None]:
    """Turn a database failure into one line naming the database (a full disk says nothing stored was lost)."""
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.DatabaseError, sa_exc.InterfaceError) as err:
        if _is_disk_full(err):
            raise DatabaseError(
                f"{url}: the disk is full while {doing}; nothing stored was lost (the last "
                "transaction was rolled back): free space, then `greenspec resume`"
            ) from err
        first = str(getattr(err, "orig", None) or err).splitlines()[0][:200]
        raise DatabaseError(f"{url}: cannot use the database while {doing} ({first})") from err


def display_url(url: str) -> str:
    """A database URL as it may be shown or printed: its password masked."""
    return make_url(url).render_as_string(hide_password=True)
