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

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import DateTime, MetaData, TypeDecorator, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Dialect, Engine, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool
from typing_extensions import Self

__all__ = [
    "DB_FILENAME",
    "Database",
    "StoreError",
    "StoreOpenError",
    "UTCDateTime",
    "create_database_engine",
    "describe_url",
    "is_memory_sqlite",
    "resolve_database_url",
    "utcnow",
]

logger = logging.getLogger(__name__)

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
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def utcnow(*, naive: bool = False) -> datetime:
    """Now in UTC: timezone-aware (what :class:`UTCDateTime` columns hold), or ``naive`` for
    plain ``DateTime`` columns that hold naive UTC on every backend (the memory's, the proposer's)."""
    now = datetime.now(timezone.utc)
    return now.replace(tzinfo=None) if naive else now


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


# --------------------------------------------------------------------------- a database of one's own


class Database:
    """One SQLAlchemy database with darwin's set-up: the base of the run store, the LLM
    memory's knowledge store and the task proposer's proposals store.

    A subclass names its tables (``metadata``), how to describe itself in errors (``what``,
    ``fix``, ``error``) and, if it keeps a schema version, overrides :meth:`_create_tables`.
    ``url_or_path`` is a SQLite file path, a SQLAlchemy URL, or ``None`` for in-memory SQLite.
    The tables are created on open; sessions come from :meth:`_session` (writes from this
    process queue on a lock, SQLite's one writer at a time; in-memory SQLite is one shared
    connection, so every session takes the lock there).

    >>> from sqlalchemy import Column, Integer, MetaData, Table
    >>> class Counters(Database):
    ...     what = "counter database"
    ...     metadata = MetaData()
    ...     counters = Table("counters", metadata, Column("n", Integer))
    >>> db = Counters(None)
    >>> with db._session(write=True) as s:
    ...     _ = s.execute(Counters.counters.insert().values(n=1))
    >>> with db._session(write=False) as s:
    ...     s.execute(Counters.counters.select()).all()
    [(1,)]
    >>> db.close()
    """

    what: ClassVar[str] = "database"
    """How errors name it (``"memory database"``)."""
    fix: ClassVar[str] = "use another database URL or a SQLite path whose directory exists"
    """How an error ends: what the user can do instead."""
    error: ClassVar[type[StoreOpenError]] = StoreOpenError
    """The error an open failure raises (a subclass of :class:`StoreOpenError`)."""
    metadata: ClassVar[MetaData]
    """The tables this database holds."""

    def __init__(self, url_or_path: str | os.PathLike[str] | None) -> None:
        self.url: URL = resolve_database_url(
            ":memory:" if url_or_path is None else url_or_path, what=self.what, fix=self.fix, error=self.error
        )
        self.url_text = describe_url(self.url)
        self._is_sqlite = self.url.get_backend_name() == "sqlite"
        self._in_memory = is_memory_sqlite(self.url)
        self._lock = threading.RLock()
        self._engine = create_database_engine(self.url, what=self.what, fix=self.fix, error=self.error)
        self._write_engine = self._engine.execution_options(darwin_write=True)
        self._sessions = sessionmaker(self._engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(self._write_engine, expire_on_commit=False)
        try:
            self._create_tables()
        except BaseException:
            self._engine.dispose()
            raise

    def _create_tables(self) -> None:
        """Create the tables that are missing (another process may create them at the same moment)."""
        try:
            with self._lock:
                try:
                    self.metadata.create_all(self._write_engine)
                except (sa_exc.ProgrammingError, sa_exc.IntegrityError, sa_exc.OperationalError) as e:
                    if not self._is_sqlite and isinstance(e, sa_exc.OperationalError):
                        raise
                    logger.info("retrying table creation in the %s after a concurrent create: %s", self.what, e)
                    self.metadata.create_all(self._write_engine)
        except sa_exc.DBAPIError as e:
            raise self.error(
                f"cannot open the {self.what} {self.url_text}: {e.orig or e}. {self._open_fix()}"
            ) from None

    def _open_fix(self) -> str:
        """What to check when the database would not open."""
        if self._is_sqlite:
            return f"Check that the file and its directory are writable by this user and the disk is not full, or {self.fix}."
        return (
            "Check that the server is running and reachable, that the database exists and the credentials are "
            f"right (put the password in the URL from an environment variable), or {self.fix}."
        )

    @contextmanager
    def _session(self, write: bool) -> Iterator[Session]:
        """One transaction: commits on success, rolls back on any error."""
        locked = self._in_memory or (write and self._is_sqlite)
        if locked:
            self._lock.acquire()
        try:
            with (self._write_sessions if write else self._sessions).begin() as s:
                yield s
        finally:
            if locked:
                self._lock.release()

    def close(self) -> None:
        """Release all connections (SQLite checkpoints its WAL into the file on the last close)."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url_text!r})"
