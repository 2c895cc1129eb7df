"""The append path: link and insert a batch of prepared drafts under the chain lock.

    appender = Appender(backend)
    appender.commit([prepare(draft)])      # -> [Appended(seq=..., hash=..., ...)]
    GroupCommitter(appender.commit, retry_alone=item_specific, interrupted=interrupted)

``prepare`` (audit.store._prepare) does everything that does not depend on the chain head
(validation, canonical checks, payload digests), so a bad draft fails before it can hold up
a group. ``commit``
takes the chain lock, reads the head, links each event to the one before and inserts
payloads, policies and events in one transaction.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, Table, event
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InvalidRequestError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.pool import PoolProxiedConnection

from audit.canonical import canonical_bytes
from audit.errors import AppendFailed, ContentConflict, InvalidEvent
from audit.store._fork import abandon
from audit.store._prepare import Known, Prepared
from audit.store._review_append import review_commit, review_schema
from audit.store.backend import CONTENT_CONFLICT, Backend, db_reason
from audit.store.chain import GENESIS, as_bytes, canonical_time
from audit.store.models import Appended
from audit.store.schema import column_names, metadata
from audit.store.signing import Signer

APPEND_HINT = (
    "Nothing was written. Check that the audit database is reachable, writable and has disk "
    "space, then retry."
)


def item_specific(exc: Exception) -> bool:
    """Whether a failed batch is worth retrying item by item (``GroupCommitter.retry_alone``).

    Yes when one event can be the cause: a constraint or a value the database refused
    (IntegrityError, DataError), an error binding one row's values, an invalid event, or any
    other non-database error. No when the database itself failed (lock timeout, I/O error,
    disk full, lost connection, permission denied: every other DBAPI error), because each
    retry would fail the same way after its own wait.
    """
    cause = exc.__cause__ if isinstance(exc, AppendFailed) else exc
    if isinstance(cause, IntegrityError | DataError):
        return True
    return not isinstance(cause, DBAPIError | OSError)


def interrupted(exc: BaseException) -> AppendFailed:
    """What a waiting append raises when the thread committing its group was interrupted."""
    return AppendFailed(
        f"the audit record's group commit was interrupted ({type(exc).__name__}), so it is "
        "not known to be committed.",
        hint="Run `gateway audit show REQUEST_ID` to see what was recorded, then retry.",
    )


# The hot path's statements, written once as driver SQL: building and compiling Core
# constructs on every append cost more than the SQLite work itself. The SQL is the same on
# both backends but for the placeholder; column values go through each column's own bind
# processor (see _Insert), so the stored values are the ones Core would have written.
_HEAD_SQL = "SELECT seq, hash FROM events WHERE seq >= 1 ORDER BY seq DESC LIMIT 1"


class _Insert:
    """One INSERT of every column of ``table`` as driver SQL, with the columns' bind
    processors; :meth:`params` takes each row's values by column name."""

    def __init__(self, table: Table, dialect: Dialect, *, ignore: bool) -> None:
        columns = column_names(table)
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        self.sql = (
            f"INSERT INTO {table.name} ({', '.join(columns)}) "
            f"VALUES ({', '.join([mark] * len(columns))})"
            + (" ON CONFLICT DO NOTHING" if ignore else "")
        )
        self._columns = columns
        self._processors = [table.c[name].type.bind_processor(dialect) for name in columns]

    def params(self, rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        out = []
        for row in rows:
            out.append(
                tuple(
                    row[name] if proc is None else proc(row[name])
                    for name, proc in zip(self._columns, self._processors, strict=True)
                )
            )
        return out


_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class _ContentCheck:
    """Insert-if-absent that compares: a content row already stored under one of the batch's
    digests must hold the batch's bytes, or the append fails closed (:class:`ContentConflict`).

    Content rows are written once, so a row put there ahead of time under the digest of a
    future request body would otherwise stand in for the bytes that were sent.

    - SQLite (``enabled``): the transaction holds the write lock throughout, so the rows found
      *before* the insert are the only ones that can differ. The insert skips those (``ON
      CONFLICT DO NOTHING``) and counts the rows it did write; only when it wrote fewer than
      it was given (rarely) are the batch's rows read back and compared byte for byte, inside
      the same transaction, so a conflict still rolls everything back. Usually every row is
      new, and the read costs nothing.
    - PostgreSQL: the database checks it in the same statements, at no extra round trip. Its
      content trigger (0007) refuses a row that does not hash to its key from every role, and
      the chain guard refuses an event that references such a row (one stored earlier, or by
      the owner with the triggers off) with SQLSTATE :data:`CONTENT_CONFLICT`, which
      :func:`conflict_of` turns into the same error.
    """

    def __init__(self, dialect: str) -> None:
        self.enabled = dialect == "sqlite"

    @staticmethod
    def _keys(rows: dict[str, dict[str, Any]]) -> str:
        for key in rows:  # inlined below: a digest is "sha256:" and hex, nothing else
            if not _DIGEST.fullmatch(key):
                raise InvalidEvent(f"{key!r} is not a content digest.")
        return ", ".join(f"'{key}'" for key in rows)

    def compare(
        self, run: Run, payloads: dict[str, dict[str, Any]], policies: dict[str, dict[str, Any]]
    ) -> None:
        if not self.enabled or (not payloads and not policies):
            return
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


def conflict_of(exc: SQLAlchemyError) -> ContentConflict | None:
    """The :class:`ContentConflict` a PostgreSQL refusal stands for (the chain guard's
    SQLSTATE :data:`CONTENT_CONFLICT`, DETAIL ``"TABLE DIGEST"``), else None."""
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlstate", None) != CONTENT_CONFLICT:
        return None
    detail = str(getattr(getattr(orig, "diag", None), "message_detail", None) or "")
    table, _, key = detail.partition(" ")
    return ContentConflict(table or "content", [key] if key else [])


# Runs one statement inside the append transaction: with params, executemany and back the
# number of rows it wrote, as the one item of a list (-1 when the driver does not know);
# without, execute and every row back.
Run = Callable[[str, "list[tuple[Any, ...]] | None"], list[Any]]


class _SqliteWriter:
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
    def transaction(self) -> Iterator[Run]:
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


class _EngineWriter:
    """The append transaction through the engine (PostgreSQL): pooled connections that are
    invalidated after a lost connection, and the advisory chain lock."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    @contextmanager
    def transaction(self) -> Iterator[Run]:
        with self._backend.writer.begin() as conn:
            self._backend.lock_chain(conn)

            def run(sql: str, params: list[tuple[Any, ...]] | None) -> list[Any]:
                if params is None:
                    return list(conn.exec_driver_sql(sql).all())
                return [conn.exec_driver_sql(sql, params).rowcount]

            yield run

    def after_fork(self) -> None:
        pass  # no state of its own: the backend replaces the engine's pool

    def close(self) -> None:
        pass


class Appender:
    """``signer`` signs each event's hash as it is linked (audit.store.signing); without one the
    events are written unsigned (NULL ``signature``), which verify reports when asked to
    check signatures."""

    def __init__(self, backend: Backend, signer: Signer | None = None) -> None:
        self._backend = backend
        self.signer = signer
        # PostgreSQL with synchronous_commit=off may lose acknowledged commits: never skip.
        self.known = Known(
            enabled=not (backend.dialect == "postgresql" and backend.durability == "os")
        )
        # A new connection may be to a restarted or restored database: start over. (On
        # PostgreSQL the reader shares this engine; forgetting too often only costs a write.)
        event.listen(backend.writer, "connect", self._reconnected)
        self._durability = canonical_bytes(backend.durability)
        dialect = backend.writer.dialect
        self._events = _Insert(metadata.tables["events"], dialect, ignore=False)
        self._payloads = _Insert(metadata.tables["payloads"], dialect, ignore=True)
        self._policies = _Insert(metadata.tables["policies"], dialect, ignore=True)
        self._content = _ContentCheck(backend.dialect)
        # A reviewer's session appends through migration 0012's committing procedure (known
        # at its first append: it asks the database).
        self._reviewer: str | None = None  # its events table's schema
        self._asked = backend.dialect != "postgresql"
        self._writer: _SqliteWriter | _EngineWriter = (
            _SqliteWriter(backend.writer) if backend.dialect == "sqlite" else _EngineWriter(backend)
        )

    def _reconnected(self, _dbapi_conn: Any, _record: Any) -> None:
        self.known.forget()

    def after_fork(self) -> None:
        """In a forked child, after :meth:`Backend.after_fork`: fresh locks and caches."""
        self.known.after_fork()
        self._writer.after_fork()

    def close(self) -> None:
        self._writer.close()
        with suppress(InvalidRequestError):  # already removed
            event.remove(self._backend.writer, "connect", self._reconnected)

    def commit(self, batch: list[Prepared]) -> list[Appended]:
        known = self.known
        signer = self.signer
        try:
            if not self._asked:
                self._reviewer = review_schema(self._backend)
                self._asked = True
            if self._reviewer is not None:
                return review_commit(self._backend, self._reviewer, signer, batch)
            with self._writer.transaction() as run:
                # A forged row below 1 is not part of the chain, so the head ignores it.
                head = run(_HEAD_SQL, None)
                seq, prev = head[0] if head else (0, GENESIS)  # SELECT seq, hash
                now = datetime.now(UTC)
                fixed = (self._durability, canonical_time(now))
                events: list[dict[str, Any]] = []
                results: list[Appended] = []
                payloads: dict[str, dict[str, Any]] = {}
                policies: dict[str, dict[str, Any]] = {}
                for item in batch:
                    seq += 1
                    row = item.event_row(seq, prev, now, fixed)
                    if signer is not None:
                        # Under the chain lock, unavoidably: the hash depends on prev_hash.
                        # About 20 us an event (bench/results/security.md).
                        row["signature"] = signer.sign(row["hash"])
                        row["key_id"] = signer.key_id
                    events.append(row)
                    results.append(
                        Appended(seq=seq, hash=row["hash"], event_id=item.event_id, recorded_at=now)
                    )
                    prev = row["hash"]
                    for r in item.payload_rows:
                        if r["digest"] not in known.payloads:
                            payloads[r["digest"]] = r
                    policy = item.policy_row
                    if policy and policy["fingerprint"] not in known.policies:
                        policies[policy["fingerprint"]] = policy
                # A content row is compared only when one was there already (the insert
                # wrote fewer rows than it was given): see _ContentCheck.
                written = 0
                if payloads:
                    params = self._payloads.params(list(payloads.values()))
                    written += run(self._payloads.sql, params)[0]
                if policies:
                    params = self._policies.params(list(policies.values()))
                    written += run(self._policies.sql, params)[0]
                if written != len(payloads) + len(policies):
                    self._content.compare(run, payloads, policies)
                run(self._events.sql, self._events.params(events))
        except BaseException as exc:
            # Whatever went wrong, the database may not hold what this process saw committed
            # (a lost connection, a server that restarted without its last commits).
            known.forget()
            if not isinstance(exc, SQLAlchemyError):
                raise
            conflict = conflict_of(exc)
            if conflict is not None:
                raise conflict from exc
            reason = db_reason(exc)
            raise AppendFailed(
                f"the audit record could not be committed ({reason}).", hint=APPEND_HINT
            ) from exc
        known.committed(batch)
        return results
