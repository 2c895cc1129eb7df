"""The format-2 append (PostgreSQL): seqs from a SEQUENCE, no chain lock, commit, return.

    appender = SequencedAppender(backend, store_id, signer)
    appender.commit([prepare(draft)])      # -> [Appended(seq=..., hash=sha256(body), ...)]

The only shared critical section is ``nextval('events_seq')`` for the whole group (through
``audit_reserve(n)``, which bounds a reviewer's reservations: migration 0011), inside
PostgreSQL and released before the statement returns. Each body is filled with its seq and
time, hashed on its own (``hash = sha256(body)``, ``prev_hash = ''``) and signed under the
format-2 domain outside any lock; payloads, policies and events are inserted and committed
(``synchronous_commit`` per durability). ``commit`` returns only after COMMIT, so the
gateway still answers only once its outcome is durable. The link to the previous event is
the integrator's (audit.sequenced.integrator), never on the request path.

A transaction that fails after ``nextval`` would leave holes that stall integration for
its grace period, so the writer voids its own seqs at once, in a new transaction (``ON
CONFLICT DO NOTHING``: a seq already holding a row keeps it), signed by its record key, and
then raises the usual :class:`AppendFailed`.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, event
from sqlalchemy.exc import InvalidRequestError, SQLAlchemyError

from audit.canonical import canonical_bytes
from audit.errors import AppendFailed
from audit.store._append import APPEND_HINT, _Insert, conflict_of
from audit.store._prepare import Known, Prepared
from audit.store.backend import Backend, db_reason
from audit.store.chain import canonical_time
from audit.store.models import Appended
from audit.store.schema import metadata
from audit.store.sequenced import void_row
from audit.store.signing import SEQUENCED_PREV, Signer

# ``nextval`` for the whole group, through the function that bounds what a role recording
# only its own reads may reserve (migration 0011).
NEXTVAL_SQL = "SELECT audit_reserve(%(n)s)"
ROLLED_BACK = "rolled back"  # a void's reason when its own writer voided it


class SequencedAppender:
    """The format-2 counterpart of :class:`audit.store._append.Appender` (same ``commit`` shape,
    so the store's group commit drives either)."""

    def __init__(self, backend: Backend, store_id: str, signer: Signer | None = None) -> None:
        self._backend = backend
        self._store_id = store_id  # a format-2 signature names its log
        self.signer = signer
        self.known = Known(enabled=backend.durability != "os")  # see Known
        event.listen(backend.writer, "connect", self._reconnected)
        self._durability = canonical_bytes(backend.durability)
        dialect = backend.writer.dialect
        self._events = _Insert(metadata.tables["events"], dialect, ignore=False)
        self._voids = _Insert(metadata.tables["events"], dialect, ignore=True)
        self._payloads = _Insert(metadata.tables["payloads"], dialect, ignore=True)
        self._policies = _Insert(metadata.tables["policies"], dialect, ignore=True)
        self.voided = 0  # seqs this writer voided after a rollback (tests, benchmarks)

    def _reconnected(self, _dbapi_conn: Any, _record: Any) -> None:
        self.known.forget()

    def after_fork(self) -> None:
        self.known.after_fork()

    def close(self) -> None:
        with suppress(InvalidRequestError):  # already removed
            event.remove(self._backend.writer, "connect", self._reconnected)

    def commit(self, batch: list[Prepared]) -> list[Appended]:
        seqs: list[int] = []
        try:
            with self._backend.writer.begin() as conn:
                seqs = [int(r[0]) for r in conn.exec_driver_sql(NEXTVAL_SQL, {"n": len(batch)})]
                results = self._insert(conn, batch, seqs)
        except BaseException as exc:
            self.known.forget()
            if seqs:
                self._void(seqs)
            if not isinstance(exc, SQLAlchemyError):
                raise
            conflict = conflict_of(exc)
            if conflict is not None:
                raise conflict from exc
            raise AppendFailed(
                f"the audit record could not be committed ({db_reason(exc)}).", hint=APPEND_HINT
            ) from exc
        self.known.committed(batch)
        return results

    def _insert(self, conn: Connection, batch: list[Prepared], seqs: list[int]) -> list[Appended]:
        known, signer = self.known, self.signer
        now = datetime.now(UTC)
        fixed = (self._durability, canonical_time(now))
        events: list[dict[str, Any]] = []
        results: list[Appended] = []
        payloads: dict[str, dict[str, Any]] = {}
        policies: dict[str, dict[str, Any]] = {}
        for seq, item in zip(seqs, batch, strict=True):
            # prev_hash '' makes the row's hash sha256(body): see audit.store.sequenced
            row = item.event_row(seq, SEQUENCED_PREV, now, fixed)
            if signer is not None:
                # outside any lock
                row["signature"] = signer.sign(row["hash"], sequenced=True, store_id=self._store_id)
                row["key_id"] = signer.key_id
            events.append(row)
            results.append(
                Appended(seq=seq, hash=row["hash"], event_id=item.event_id, recorded_at=now)
            )
            for r in item.payload_rows:
                if r["digest"] not in known.payloads:
                    payloads[r["digest"]] = r
            policy = item.policy_row
            if policy and policy["fingerprint"] not in known.policies:
                policies[policy["fingerprint"]] = policy
        # PostgreSQL's content trigger and chain guard compare content rows (see
        # audit.store._writers._ContentCheck), so insert-if-absent is enough here.
        if payloads:
            conn.exec_driver_sql(self._payloads.sql, self._payloads.params(list(payloads.values())))
        if policies:
            conn.exec_driver_sql(self._policies.sql, self._policies.params(list(policies.values())))
        conn.exec_driver_sql(self._events.sql, self._events.params(events))
        return results

    def _void(self, seqs: list[int]) -> None:
        """Best effort: if this fails too, the integrator voids the holes after its grace."""
        rows = [
            void_row(s, self.signer, ROLLED_BACK, self._durability, store_id=self._store_id)
            for s in seqs
        ]
        try:
            with self._backend.writer.begin() as conn:
                written = conn.exec_driver_sql(self._voids.sql, self._voids.params(rows)).rowcount
            self.voided += max(0, written)
        except SQLAlchemyError:
            pass
