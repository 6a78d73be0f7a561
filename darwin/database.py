"""Connections to darwin's databases: URLs, engines and the SQLite set-up they share.

The run store (:mod:`darwin.store`), the LLM memory's knowledge and the task proposer's
proposals can live in one SQLite file or on one server. They open it the same way:
:func:`resolve_database_url` turns a path or URL into a SQLAlchemy URL and names a missing
directory with the fix, and :func:`create_database_engine` sets SQLite up for several writers
(WAL, a busy timeout, writes taking the lock up front with ``BEGIN IMMEDIATE``).

>>> url = resolve_database_url(":memory:", what="run database", fix="-")
>>> engine = create_database_engine(url, what="run database", fix="-")
>>> engine.dialect.name
'sqlite'
>>> engine.dispose()
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, TypeDecorator, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Dialect, Engine, make_url
from sqlalchemy.pool import StaticPool

__all__ = [
    "DB_FILENAME",
    "StoreError",
    "StoreOpenError",
    "UTCDateTime",
    "create_database_engine",
    "describe_url",
    "is_memory_sqlite",
    "resolve_database_url",
    "utcnow",
]

DB_FILENAME = "run.db"
"""The run's database file in its directory (the memory and the proposer use it too by default)."""

_SQLITE_BUSY_TIMEOUT_MS = 30_000


# --------------------------------------------------------------------------- errors


class StoreError(RuntimeError):
    """A run-database operation failed; the message names what, why and how to fix it."""


class StoreOpenError(StoreError):
    """The database could not be opened (missing directory, unreachable server, no driver)."""


# --------------------------------------------------------------------------- time


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return (
            value.replace(tzinfo=timezone.utc)
            if value.tzinfo is None
            else value.astimezone(timezone.utc)
        )


def utcnow() -> datetime:
    """Now, timezone-aware UTC (what :class:`UTCDateTime` columns hold)."""
    return datetime.now(timezone.utc)


# --------------------------------------------------------------------------- urls and engines


def is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def _driver_hint(url: URL) -> str:
    driver = url.get_driver_name()
    if url.get_backend_name() == "postgresql":
        if driver == "psycopg2":
            return "Install it with 'pip install psycopg2-binary'"
        return "Install it with 'pip install \"psycopg[binary]\"' (postgresql:// uses psycopg 3)"
    return f"Install the Python DBAPI driver for {url.drivername!r} (pip install ...)"


def describe_url(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def resolve_database_url(
    url_or_path: str | os.PathLike[str], *, what: str, fix: str, error: type[StoreOpenError] = StoreOpenError
) -> URL:
    """A SQLAlchemy URL from a URL, a SQLite file path or ``":memory:"``; a SQLite file whose
    directory is missing, or that is a directory, raises ``error`` naming ``what`` and ``fix``.
    Shared by the run store and the LLM memory's knowledge store.

    >>> resolve_database_url(":memory:", what="run database", fix="-").render_as_string()
    'sqlite://'
    """
    if isinstance(url_or_path, str) and url_or_path == ":memory:":
        return make_url("sqlite://")
    if isinstance(url_or_path, str) and "://" in url_or_path:
        try:
            url = make_url(url_or_path)
        except sa_exc.ArgumentError as e:
            raise error(
                f"cannot parse the {what} URL {url_or_path!r}: {e}. Use a SQLAlchemy URL such as "
                "'sqlite:///path/run.db' or 'postgresql+psycopg://user@host/dbname', or a plain file path."
            ) from e
    else:
        url = URL.create("sqlite", database=str(Path(url_or_path).expanduser().absolute()))
    if url.get_backend_name() == "sqlite" and not is_memory_sqlite(url):
        db_path = Path(str(url.database)).expanduser()
        parent = db_path.absolute().parent
        if not parent.is_dir():
            raise error(
                f"cannot open the {what} {str(db_path)!r}: directory {str(parent)!r} does not exist. "
                f"Create it first (mkdir -p {parent}) or {fix}."
            )
        if db_path.is_dir():
            raise error(
                f"cannot open the {what} {str(db_path)!r}: it is a directory. "
                f"Name a file in it instead (e.g. {db_path / DB_FILENAME}) or {fix}."
            )
    return url


def create_database_engine(url: URL, *, what: str, fix: str, error: type[StoreOpenError] = StoreOpenError) -> Engine:
    """An engine for ``url``: SQLite in WAL mode with a busy timeout, foreign keys on, and
    writes taking the write lock up front (``BEGIN IMMEDIATE`` on connections run with the
    execution option ``darwin_write=True``) so concurrent writers queue instead of failing;
    in-memory SQLite is one shared connection; server databases ping before use. A missing
    driver raises ``error`` naming ``what`` and ``fix``."""
    url_text = describe_url(url)
    is_sqlite = url.get_backend_name() == "sqlite"
    in_memory = is_memory_sqlite(url)
    try:
        if in_memory:
            engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
        elif is_sqlite:
            engine = create_engine(
                url, connect_args={"check_same_thread": False, "timeout": _SQLITE_BUSY_TIMEOUT_MS / 1000}
            )
        else:
            engine = create_engine(url, pool_pre_ping=True)
    except (sa_exc.NoSuchModuleError, ImportError) as e:
        raise error(
            f"cannot open the {what} {url_text}: its driver is not installed ({e}). {_driver_hint(url)}, {fix}."
        ) from e
    except sa_exc.ArgumentError as e:
        raise error(f"cannot open the {what} {url_text}: {e}") from e
    if is_sqlite:
        _configure_sqlite(engine, in_memory)
    return engine


def _configure_sqlite(engine: Engine, in_memory: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module (it defers BEGIN, which breaks
        # write-lock upgrades under concurrency); we emit BEGIN ourselves below.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA foreign_keys = ON")
            if not in_memory:
                cur.execute("PRAGMA journal_mode = WAL")
                cur.execute("PRAGMA synchronous = NORMAL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get("darwin_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
