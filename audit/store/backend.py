"""Engines for the two backends, with the durability and locking each needs.

    backend = Backend.connect("sqlite:///gateway-audit.db", "fsync")
    with backend.writer.begin() as conn:   # BEGIN IMMEDIATE on SQLite: holds the chain lock
        backend.lock_chain(conn)           # a row lock on PostgreSQL, no-op on SQLite

SQLite: WAL, ``synchronous=FULL`` (fsync) or ``NORMAL`` (os), a busy timeout so processes
queue for the write lock instead of failing. PostgreSQL: ``synchronous_commit`` on or off per
durability, and ``lock_timeout`` for the session. Both wait 60 s, or ``?lock_timeout=SECONDS``
from the URL (``sqlite:///audit.db?lock_timeout=5``); past it an append fails closed with
``AppendFailed``, so no call waits on a lock for ever. Writers and readers use separate
engines so reads never take the write lock.

PostgreSQL's chain lock is the row lock that ``audit_chain_lock()`` takes (migration 0007):
only a session that may INSERT into ``events`` can take it, unlike an advisory lock, which any
role that can connect may take and hold.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

from audit.errors import AppendFailed, DatabaseUnavailable
from audit.store._fork import abandon

DURABILITIES = ("fsync", "os")
BUSY_TIMEOUT_MS = 60_000
LOCK_TIMEOUT_PARAM = "lock_timeout"  # URL query parameter, seconds; ours, not the driver's
# The PostgreSQL chain lock (migration 0007), held to the end of the transaction.
# A PostgreSQL store's connections (its engine's pool, shared by the writer and the readers):
# PG_POOL_SIZE kept open, up to PG_CONNECTIONS at once. Whatever runs store work in threads
# bounds them by this (gateway.request._threads.MAX_THREADS), so no thread waits for a
# connection: a served gateway with --workers N opens up to N x PG_CONNECTIONS.
PG_POOL_SIZE = 8
PG_CONNECTIONS = 40
CHAIN_LOCK_SQL = "SELECT audit_chain_lock()"
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE when lock_timeout expires
# The chain guard's SQLSTATE (migration 0007) for an event whose content row under its digest
# holds other bytes: reported as ContentConflict.
CONTENT_CONFLICT = "23A01"
URL_HINT = "Set GATEWAY_DATABASE_URL to sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB."


def db_reason(exc: BaseException) -> str:
    """The driver's first line, for a one-line error ("disk I/O error", "permission denied")."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def shown(url: URL) -> str:
    """The URL as it may appear in a message or log: the password is always ``***``."""
    return url.render_as_string(hide_password=True)


class _NoRowsOrValues(logging.Filter):
    """On SQLAlchemy's engine logger: statements may be logged (INFO), never what they carry.

    ``hide_parameters`` keeps bound values out of statement lines, but at DEBUG the engine
    also logs result rows, which hold prompt and answer text (for the audit database only,
    never for logs). So DEBUG records of the engine are dropped, whatever level a host sets.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO


logging.getLogger("sqlalchemy.engine.Engine").addFilter(_NoRowsOrValues())


def _enter_wal(cursor: Any, busy_ms: int) -> None:
    """Switch the file to WAL, waiting like any other lock wait.

    Only the first switch of a new file changes anything, and it needs the file to itself;
    SQLite answers "database is locked" at once, without its busy handler, while another
    process (creating the same new file) holds a lock. So the switch is retried until the
    busy timeout, as every other statement would wait."""
    deadline = time.monotonic() + busy_ms / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _create_private(path: Path) -> None:
    """Make a new database file readable by its owner only (0600; a umask can only narrow it)
    on the first connection, before SQLite would make it 0644 under the usual umask: the log holds
    prompts and answers. SQLite gives the ``-wal`` and ``-shm`` files it creates the mode of
    the database file, so they follow. An existing file keeps the mode it has."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:  # there already, or not creatable: SQLite's own open says what is wrong
        return
    os.close(fd)


def _engine(url: URL, **kwargs: Any) -> Engine:
    """``create_engine``, with an unknown or uninstalled driver turned into one clear line."""
    try:
        # hide_parameters: a host that turns SQLAlchemy's logging up would otherwise see the
        # bound values, and those are prompt and answer text (they belong in the log only).
        return create_engine(url, hide_parameters=True, **kwargs)
    except (NoSuchModuleError, ImportError) as exc:
        # NoSuchModuleError: SQLAlchemy has no such dialect (postgresql+nosuch); ImportError:
        # it has one, but its DBAPI module is not installed (postgresql+pg8000).
        raise DatabaseUnavailable(
            f"cannot use {shown(url)!r}: no database driver {url.drivername!r} is installed "
            f"({type(exc).__name__}).",
            hint=URL_HINT,
        ) from None
    except ArgumentError as exc:
        raise DatabaseUnavailable(
            f"cannot use {shown(url)!r}: {db_reason(exc)}.", hint=URL_HINT
        ) from None


def _lock_timeout_ms(value: str | tuple[str, ...] | None) -> int | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else value[-1]
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 86_400:  # also refuses NaN
        raise DatabaseUnavailable(
            f"lock_timeout={text!r} in the audit database URL is not a number of seconds.",
            hint="Use e.g. ?lock_timeout=5 (seconds, more than 0, at most 86400).",
        )
    return max(1, round(seconds * 1000))


@dataclass(frozen=True)
class Backend:
    url: str  # for messages: the password is rendered as ***
    dialect: str
    durability: str
    writer: Engine
    reader: Engine
    lock_timeout_ms: int = BUSY_TIMEOUT_MS

    @classmethod
    def connect(cls, url: str, durability: str) -> Backend:
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, not {durability!r}")
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise DatabaseUnavailable(
                "the audit database URL is not a database URL.", hint=URL_HINT
            ) from None
        lock_ms = _lock_timeout_ms(parsed.query.get(LOCK_TIMEOUT_PARAM))
        parsed = parsed.difference_update_query([LOCK_TIMEOUT_PARAM])
        name = parsed.get_backend_name()
        # URL objects go to create_engine; only the rendering with the password hidden is kept
        # (Backend.url) or put into a message.
        if name == "sqlite":
            return cls._sqlite(parsed, durability, lock_ms or BUSY_TIMEOUT_MS)
        if name == "postgresql":
            if parsed.drivername == "postgresql":
                parsed = parsed.set(drivername="postgresql+psycopg")
            return cls._postgres(parsed, durability, lock_ms or BUSY_TIMEOUT_MS)
        raise DatabaseUnavailable(f"the audit store does not support {name!r}.", hint=URL_HINT)

    @classmethod
    def _sqlite(cls, url: URL, durability: str, busy_ms: int) -> Backend:
        database = url.database
        if not database or database == ":memory:":
            raise DatabaseUnavailable(
                "the audit database must be a file, not an in-memory database.", hint=URL_HINT
            )
        if not Path(database).parent.exists():
            raise DatabaseUnavailable(
                f"the folder for the audit database {database!r} does not exist.",
                hint="Create the folder or point GATEWAY_DATABASE_URL elsewhere.",
            )
        sync = "FULL" if durability == "fsync" else "NORMAL"

        def make(begin: str) -> Engine:
            engine = _engine(url, connect_args={"check_same_thread": False})

            @event.listens_for(engine, "do_connect")
            def _private_file(*_args: Any) -> None:
                _create_private(Path(database))  # before sqlite3 would create it

            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                # Autocommit at the driver so that we issue BEGIN ourselves (SQLAlchemy's
                # documented recipe): the writer needs BEGIN IMMEDIATE to take the lock first.
                dbapi_conn.isolation_level = None
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout = {busy_ms}")
                _enter_wal(cur, busy_ms)
                cur.execute(f"PRAGMA synchronous = {sync}")
                cur.close()

            @event.listens_for(engine, "begin")
            def _begin(conn: Connection) -> None:
                conn.exec_driver_sql(begin)

            return engine

        return cls(
            shown(url), "sqlite", durability, make("BEGIN IMMEDIATE"), make("BEGIN"), busy_ms
        )

    @classmethod
    def _postgres(cls, url: URL, durability: str, lock_ms: int) -> Backend:
        commit = "on" if durability == "fsync" else "off"
        # Always a lock_timeout: a session holding the chain lock (or a row an append needs)
        # makes appends fail closed after it, never hang.
        options = f"-c synchronous_commit={commit} -c lock_timeout={lock_ms}"
        engine = _engine(
            url,
            # No pre-ping: it costs a round trip per append. After a server restart the
            # first append on a dead connection fails closed (AppendFailed) and the pool
            # drops its stale connections, so the next append reconnects.
            pool_size=PG_POOL_SIZE,
            max_overflow=PG_CONNECTIONS - PG_POOL_SIZE,
            connect_args={"options": options, "connect_timeout": 10},
        )
        return cls(shown(url), "postgresql", durability, engine, engine, lock_ms)

    def lock_chain(self, conn: Connection) -> None:
        """Take the chain lock (PostgreSQL; SQLite's BEGIN IMMEDIATE took it already).

        Held to the end of the transaction; instances queue here, then read the head. Past
        ``lock_timeout`` the append fails with an :class:`AppendFailed` that names the lock.
        """
        if self.dialect != "postgresql":
            return
        try:
            conn.exec_driver_sql(CHAIN_LOCK_SQL)
        except OperationalError as exc:
            refusal = self.lock_refusal(exc)
            if refusal is None:
                raise
            raise refusal from exc

    def lock_refusal(self, exc: BaseException) -> AppendFailed | None:
        """The :class:`AppendFailed` that names the chain lock, when ``exc`` (a SQLAlchemy
        error) is PostgreSQL's ``lock_timeout`` expiring; else None."""
        if getattr(getattr(exc, "orig", None), "sqlstate", None) != LOCK_NOT_AVAILABLE:
            return None
        return AppendFailed(
            f"the audit chain lock was not granted within {self.lock_timeout_ms / 1000:g} s: "
            "another session holds it (an append in progress, or a session that keeps a "
            "transaction open).",
            hint="Nothing was written. Retry; if it persists, find the session holding the "
            "lock (pg_stat_activity, state 'idle in transaction') and end it.",
        )

    def after_fork(self) -> None:
        """In a forked child: new, empty pools, so the child opens its own connections.

        ``dispose(close=False)`` is SQLAlchemy's recipe for a child: the parent's pool is
        dropped without touching its connections. They are kept alive (:func:`abandon`),
        because deallocating them would close them: ``sqlite3_close`` in the child is what
        SQLite warns against.
        """
        for engine in {id(e): e for e in (self.writer, self.reader)}.values():
            abandon(engine.pool)
            engine.dispose(close=False)

    def dispose(self) -> None:
        self.writer.dispose()
        if self.reader is not self.writer:
            self.reader.dispose()
