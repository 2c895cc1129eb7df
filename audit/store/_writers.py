"""The format-1 append transaction, per backend: take the chain lock, learn the head, insert.

    writer = SqliteWriter(engine)            # or PostgresWriter(backend)
    appended = writer.append(link)           # link(seq, prev_hash) -> Linked rows, committed

``link`` (audit.store._append) numbers, hashes and signs a batch after a given head and
returns its rows as driver statements (:class:`Linked`); a writer decides where the head
comes from and sends the statements in one transaction.

- SQLite: BEGIN IMMEDIATE, read the head, insert, COMMIT on a connection held for the store's
  lifetime (each statement is a call into the library, not a round trip).
- PostgreSQL: the statements go in libpq's pipeline mode, so one append is one round trip
  when this writer already knows the head (it committed the last event itself): BEGIN, the
  chain lock, the inserts and COMMIT are sent together. The chain guard (migration 0007)
  checks every event against the real head under the lock, so a head that another writer
  has moved is refused (the transaction rolls back) and the append is sent again after
  reading the head: two round trips, and the next appends read the head first for a while
  (another writer is active). Without a head known it is two round trips: the lock and the
  head, then the inserts and COMMIT.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.pool import PoolProxiedConnection

from audit.errors import ContentConflict, InvalidEvent
from audit.store._fork import abandon
from audit.store.backend import CHAIN_LOCK_SQL, Backend
from audit.store.chain import GENESIS, as_bytes
from audit.store.models import Appended

# A forged row below 1 is not part of the chain, so the head ignores it.
HEAD_SQL = "SELECT seq, hash FROM events WHERE seq >= 1 ORDER BY seq DESC LIMIT 1"
# After the head was found moved by another writer, this many appends read it first.
_READ_HEAD_AFTER_MOVE = 64
# The chain guard's words for an event that does not follow the head (migration 0005/0007).
_NOT_THE_HEAD = ("does not follow the head seq", "is not the hash of seq")

_IDLE = 0  # libpq's PQTRANS_IDLE: no transaction open

Statement = tuple[str, list[tuple[Any, ...]]]


@dataclass(frozen=True)
class Linked:
    """A batch linked after a head: what to insert, and what the callers get back."""

    results: list[Appended]
    head: tuple[int, str]  # the batch's last seq and hash: the head once committed
    content: list[Statement]  # payload and policy inserts (ON CONFLICT DO NOTHING)
    events: Statement
    payloads: dict[str, dict[str, Any]]  # by digest, for the content check
    policies: dict[str, dict[str, Any]]  # by fingerprint

    @property
    def content_rows(self) -> int:
        return len(self.payloads) + len(self.policies)


Link = Callable[[int, str], Linked]

# Runs one statement inside the append transaction: with params, executemany and back the
# number of rows it wrote, as the one item of a list (-1 when the driver does not know);
# without, execute and every row back.
Run = Callable[[str, "list[tuple[Any, ...]] | None"], list[Any]]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class _ContentCheck:
    """Insert-if-absent that compares: a content row already stored under one of the batch's
    digests must hold the batch's bytes, or the append fails closed (:class:`ContentConflict`).

    Content rows are written once, so a row put there ahead of time under the digest of a
    future request body would otherwise stand in for the bytes that were sent.

    - SQLite: the transaction holds the write lock throughout, so the rows found *before* the
      insert are the only ones that can differ. The insert skips those (``ON CONFLICT DO
      NOTHING``) and counts the rows it did write; only when it wrote fewer than it was given
      (rarely) are the batch's rows read back and compared byte for byte, inside the same
      transaction, so a conflict still rolls everything back. Usually every row is new, and
      the read costs nothing.
    - PostgreSQL does not need it: the database checks it in the same statements. Its content
      trigger (0007) refuses a row that does not hash to its key from every role, and the
      chain guard refuses an event that references such a row (one stored earlier, or by the
      owner with the triggers off) with SQLSTATE ``CONTENT_CONFLICT``, which
      ``audit.store._append.conflict_of`` turns into the same error.
    """

    @staticmethod
    def _keys(rows: dict[str, dict[str, Any]]) -> str:
        for key in rows:  # inlined below: a digest is "sha256:" and hex, nothing else
            if not _DIGEST.fullmatch(key):
                raise InvalidEvent(f"{key!r} is not a content digest.")
        return ", ".join(f"'{key}'" for key in rows)

    def compare(self, run: Run, linked: Linked) -> None:
        payloads, policies = linked.payloads, linked.policies
        parts = []
        if payloads:
            parts.append(
                "SELECT 'payloads', digest, size, content FROM payloads "
                f"WHERE digest IN ({self._keys(payloads)})"
            )
        if policies:
            parts.append(
                "SELECT 'policies', fingerprint, NULL, content FROM policies "
                f"WHERE fingerprint IN ({self._keys(policies)})"
            )
        conflicts: dict[str, list[str]] = {}
        for table, key, size, stored in run(" UNION ALL ".join(parts), None):
            ours = (payloads if table == "payloads" else policies)[key]
            content = as_bytes(stored)
            if content != bytes(ours["content"]) or (table == "payloads" and size != len(content)):
                conflicts.setdefault(table, []).append(key)
        for table, keys in conflicts.items():
            raise ContentConflict(table, sorted(keys))


class SqliteWriter:
    """The SQLite append transaction on one DBAPI connection held for the store's lifetime.

    An append is a handful of tiny statements; SQLAlchemy's per-statement and per-transaction
    bookkeeping (pool checkout, execution contexts, result objects) cost more than SQLite's own
    work, so the hot path talks to the driver directly. The connection comes from the writer
    engine (its connect hook set busy_timeout, WAL and the synchronous level) and runs in
    driver autocommit mode, so BEGIN IMMEDIATE / COMMIT are ours, exactly as on the engine.
    Driver errors are wrapped as SQLAlchemy does (IntegrityError, OperationalError, ...), so
    callers classify them the same way.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dialect = engine.dialect
        self._error: type[Exception] = engine.dialect.loaded_dbapi.Error
        self._lock = threading.Lock()  # append_many may run beside a group leader
        self._proxy: PoolProxiedConnection | None = None
        self._content = _ContentCheck()

    def append(self, link: Link) -> list[Appended]:
        with self._transaction() as run:
            head = run(HEAD_SQL, None)
            seq, prev = head[0] if head else (0, GENESIS)  # SELECT seq, hash
            linked = link(seq, prev)
            # A content row is compared only when one was there already (the insert wrote
            # fewer rows than it was given): see _ContentCheck.
            written = sum(run(sql, params)[0] for sql, params in linked.content)
            if written != linked.content_rows:
                self._content.compare(run, linked)
            run(*linked.events)
        return linked.results

    def forget_head(self) -> None:
        pass  # read in every transaction: a call into the library, not a round trip

    def _connection(self) -> Any:
        if self._proxy is None:
            self._proxy = self._engine.raw_connection()
        return self._proxy.dbapi_connection

    def _abandon(self, conn: Any) -> None:
        """After a failure: end the transaction, or drop a connection that cannot."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except self._error:
            proxy, self._proxy = self._proxy, None
            if proxy is not None:
                with suppress(Exception):  # it is broken already; the next append reconnects
                    proxy.invalidate()

    @contextmanager
    def _transaction(self) -> Iterator[Run]:
        with self._lock:
            try:
                conn = self._connection()
            except self._error as exc:
                raise self._wrap("connect", exc) from exc
            cur = conn.cursor()
            statement = "BEGIN IMMEDIATE"

            def run(sql: str, params: list[tuple[Any, ...]] | None) -> list[Any]:
                nonlocal statement
                statement = sql
                if params is None:
                    return list(cur.execute(sql).fetchall())
                cur.executemany(sql, params)
                return [cur.rowcount]  # rows written: ON CONFLICT skips are not counted

            try:
                cur.execute(statement)
                yield run
                statement = "COMMIT"
                cur.execute(statement)
            except self._error as exc:
                self._abandon(conn)
                raise self._wrap(statement, exc) from exc
            except BaseException:
                self._abandon(conn)
                raise
            finally:
                cur.close()

    def after_fork(self) -> None:
        """In a forked child: set the parent's connection aside, unused and unclosed, and
        start with a new lock; the next append opens the child's own connection."""
        if self._proxy is not None:
            abandon(self._proxy)  # collected, its pool would roll it back: the parent's
        self._proxy = None
        self._lock = threading.Lock()

    def _wrap(self, statement: str, exc: Exception) -> StatementError:
        return DBAPIError.instance(statement, None, exc, self._error, dialect=self._dialect)

    def close(self) -> None:
        with self._lock:
            proxy, self._proxy = self._proxy, None
            if proxy is not None:
                proxy.close()  # back to the pool, which the backend then disposes of


class PostgresWriter:
    """The PostgreSQL append transaction in pipeline mode (see the module docstring), on a
    pooled connection per append; a connection that failed mid-way is invalidated, so the
    pool reconnects, as the engine does for its own statements."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._dialect = backend.writer.dialect
        self._error: type[Exception] = self._dialect.loaded_dbapi.Error
        self._lock = threading.Lock()  # guards the head: append_many may run beside a leader
        self._head: tuple[int, str] | None = None
        self._read_first = 0  # appends left that read the head before inserting
        # libpq 14 or later (psycopg's binary wheels bundle one); an older one gets the same
        # statements one round trip each.
        self._pipelined = bool(self._dialect.loaded_dbapi.Pipeline.is_supported())

    def forget_head(self) -> None:
        with self._lock:
            self._head = None

    def append(self, link: Link) -> list[Appended]:
        proxy = self._backend.writer.raw_connection()
        conn: Any = proxy.dbapi_connection  # psycopg.Connection
        try:
            conn.autocommit = True  # no round trip: the pipeline sends BEGIN and COMMIT
            with self._lock:
                head = self._head if self._read_first == 0 else None
                self._read_first = max(0, self._read_first - 1)
            linked = None
            if head is not None:
                try:
                    linked = self._send(conn, link(*head), read_head=False)
                except self._error as exc:
                    if not self._moved(conn, exc):
                        raise
                    with self._lock:
                        self._head, self._read_first = None, _READ_HEAD_AFTER_MOVE
            if linked is None:
                linked = self._send(conn, link, read_head=True)
            with self._lock:
                self._head = linked.head
            return linked.results
        except self._error as exc:
            self.forget_head()
            self._end(proxy, conn)
            wrapped = self._wrap(exc)
            refusal = self._backend.lock_refusal(wrapped)
            if refusal is not None:
                raise refusal from wrapped  # as Backend.lock_chain raises it
            raise wrapped from exc
        except BaseException:
            self.forget_head()
            self._end(proxy, conn)
            raise
        finally:
            with suppress(Exception):  # a broken connection was invalidated already
                conn.autocommit = False  # as the engine's other users expect it
            proxy.close()  # back to the pool (nothing is open: committed or rolled back)

    def _send(self, conn: Any, linked_or_link: Linked | Link, *, read_head: bool) -> Linked:
        # BEGIN and COMMIT are statements of the pipeline (the connection is in autocommit
        # mode meanwhile): psycopg's own would each wait for a Sync of their own.
        with conn.pipeline() if self._pipelined else nullcontext(), conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(CHAIN_LOCK_SQL)
            if read_head:
                assert callable(linked_or_link)
                cur.execute(HEAD_SQL)
                row = cur.fetchone()  # the pipeline's first round trip
                linked = linked_or_link(*(row if row else (0, GENESIS)))
            else:
                assert isinstance(linked_or_link, Linked)
                linked = linked_or_link
            for sql, params in [*linked.content, linked.events]:
                cur.executemany(sql, params)
            cur.execute("COMMIT")
        return linked  # the pipeline's end waited for every result: committed

    def _moved(self, conn: Any, exc: Exception) -> bool:
        """Whether ``exc`` is the chain guard refusing an event that did not follow the head
        (another writer appended since): then the transaction is rolled back, to retry."""
        message = str(getattr(getattr(exc, "diag", None), "message_primary", "") or "")
        if getattr(exc, "sqlstate", None) != "23514" or not any(
            words in message for words in _NOT_THE_HEAD
        ):
            return False
        if conn.broken or conn.closed:
            return False
        conn.execute("ROLLBACK")
        return True

    @staticmethod
    def _end(proxy: PoolProxiedConnection, conn: Any) -> None:
        """After a failure: roll back, or invalidate a connection that cannot."""
        try:
            if conn.broken or conn.closed:
                raise ConnectionError
            if conn.info.transaction_status != _IDLE:
                conn.execute("ROLLBACK")
        except Exception:  # noqa: BLE001 - broken either way: the pool reconnects
            with suppress(Exception):
                proxy.invalidate()

    def _wrap(self, exc: Exception) -> StatementError:
        return DBAPIError.instance("audit append", None, exc, self._error, dialect=self._dialect)

    def after_fork(self) -> None:
        self._lock = threading.Lock()
        self._head = None  # the backend replaces the engine's pool

    def close(self) -> None:
        pass
