"""The append path: link and insert a batch of prepared drafts under the chain lock.

    appender = Appender(backend)
    appender.commit([prepare(draft)])      # -> [Appended(seq=..., hash=..., ...)]
    GroupCommitter(appender.commit, retry_alone=item_specific, interrupted=interrupted)

``prepare`` (audit.store._prepare) does everything that does not depend on the chain head
(validation, canonical checks, payload digests), so a bad draft fails before it can hold up
a group. ``commit`` hands its writer (audit.store._writers) a function that links the batch
after a head (numbers, hashes and signs each event); the writer takes the chain lock, finds
the head and inserts payloads, policies and events in one transaction (on PostgreSQL usually
one round trip).
"""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, event
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InvalidRequestError,
    SQLAlchemyError,
)

from audit.canonical import canonical_bytes
from audit.errors import AppendFailed, ContentConflict
from audit.store._prepare import Known, Prepared
from audit.store._review_append import review_commit, review_schema
from audit.store._writers import Linked, PostgresWriter, SqliteWriter
from audit.store.backend import CONTENT_CONFLICT, Backend, db_reason
from audit.store.chain import canonical_time
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


def conflict_of(exc: SQLAlchemyError) -> ContentConflict | None:
    """The :class:`ContentConflict` a PostgreSQL refusal stands for (the chain guard's
    SQLSTATE :data:`CONTENT_CONFLICT`, DETAIL ``"TABLE DIGEST"``), else None."""
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlstate", None) != CONTENT_CONFLICT:
        return None
    detail = str(getattr(getattr(orig, "diag", None), "message_detail", None) or "")
    table, _, key = detail.partition(" ")
    return ContentConflict(table or "content", [key] if key else [])


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
        # A reviewer's session appends through migration 0012's committing procedure (known
        # at its first append: it asks the database).
        self._reviewer: str | None = None  # its events table's schema
        self._asked = backend.dialect != "postgresql"
        self._writer: SqliteWriter | PostgresWriter = (
            SqliteWriter(backend.writer) if backend.dialect == "sqlite" else PostgresWriter(backend)
        )

    def _reconnected(self, _dbapi_conn: Any, _record: Any) -> None:
        self.known.forget()
        self._writer.forget_head()

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
            results = self._writer.append(lambda seq, prev: self._link(batch, seq, prev))
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

    def _link(self, batch: list[Prepared], seq: int, prev: str) -> Linked:
        """Number, hash and sign ``batch`` after the head ``(seq, prev)``; its rows to insert."""
        known = self.known
        signer = self.signer
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
        content = []
        if payloads:
            content.append((self._payloads.sql, self._payloads.params(list(payloads.values()))))
        if policies:
            content.append((self._policies.sql, self._policies.params(list(policies.values()))))
        return Linked(
            results=results,
            head=(seq, prev),
            content=content,
            events=(self._events.sql, self._events.params(events)),
            payloads=payloads,
            policies=policies,
        )
