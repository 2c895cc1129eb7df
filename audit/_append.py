"""The append path: prepare a draft outside the lock, link and insert a batch under it.

    appender = Appender(backend)
    appender.commit([prepare(draft)])      # -> [Appended(seq=..., hash=..., ...)]
    GroupCommitter(appender.commit, retry_alone=item_specific, interrupted=interrupted)

``prepare`` does everything that does not depend on the chain head (validation, canonical
checks, payload digests), so a bad draft fails before it can hold up a group. ``commit``
takes the chain lock, reads the head, links each event to the one before and inserts
payloads, policies and events in one transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Insert, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError

from audit._backend import Backend, db_reason
from audit.canonical import CanonicalizationError, canonical_bytes, digest
from audit.chain import GENESIS, event_body, link_hash
from audit.errors import AppendFailed, InvalidEvent
from audit.models import Appended, EventDraft
from audit.schema import Event, Payload, PolicyVersion

APPEND_HINT = (
    "Nothing was written. Check that the audit database is reachable, writable and has disk "
    "space, then retry."
)


@dataclass(frozen=True)
class Prepared:
    """A draft with everything computed that does not need the chain lock."""

    draft: EventDraft
    event_id: str
    payload_rows: tuple[dict[str, Any], ...]
    payload_digests: dict[str, str]
    policy_row: dict[str, Any] | None

    def event_row(self, seq: int, prev: str, now: datetime, durability: str) -> dict[str, Any]:
        """The events row at ``seq`` after ``prev``: what needs the chain lock."""
        d = self.draft
        columns: dict[str, Any] = {
            "seq": seq,
            "event_id": self.event_id,
            "request_id": d.request_id,
            "kind": d.kind.value,
            "recorded_at": now,
            "task": d.task,
            "caller": d.caller,
            "policy_fingerprint": d.policy_fingerprint,
            "request_hash": d.request_hash,
        }
        body = event_body(
            **columns,
            durability=durability,
            data=d.data,
            payloads=self.payload_digests,
            policy_ref=self.policy_row["fingerprint"] if self.policy_row else None,
        )
        return {**columns, "body": body, "prev_hash": prev, "hash": link_hash(prev, body)}


def prepare(draft: EventDraft) -> Prepared:
    try:
        canonical_bytes(draft.data)  # fail here, before the lock, not inside a batch
        policy_row = None
        if draft.policy_content is not None:
            content = canonical_bytes(draft.policy_content)
            if digest(content) != draft.policy_fingerprint:
                raise InvalidEvent(
                    "the policy content does not hash to the event's policy_fingerprint.",
                    hint="Pass the policy's content() and its fingerprint together.",
                )
            policy_row = {"fingerprint": draft.policy_fingerprint, "content": content}
    except CanonicalizationError as exc:
        raise InvalidEvent(f"the event data cannot be recorded: {exc}.") from None
    digests = {name: digest(b) for name, b in draft.payloads.items()}
    rows = {digests[name]: b for name, b in draft.payloads.items()}
    return Prepared(
        draft=draft,
        event_id=uuid.uuid4().hex,
        payload_rows=tuple(
            {"digest": key, "size": len(b), "content": b} for key, b in rows.items()
        ),
        payload_digests=digests,
        policy_row=policy_row,
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


class Appender:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    def _insert_ignoring_duplicates(self, model: type[Payload] | type[PolicyVersion]) -> Insert:
        if self._backend.dialect == "postgresql":
            return pg_insert(model).on_conflict_do_nothing()
        return sqlite_insert(model).on_conflict_do_nothing()

    def commit(self, batch: list[Prepared]) -> list[Appended]:
        try:
            with self._backend.writer.begin() as conn:
                self._backend.lock_chain(conn)
                head = conn.execute(
                    select(Event.seq, Event.hash)
                    .where(Event.seq >= 1)  # a forged row below 1 is not part of the chain
                    .order_by(Event.seq.desc())
                    .limit(1)
                ).first()
                seq, prev = (head[0], head[1]) if head else (0, GENESIS)
                now = datetime.now(UTC)
                events: list[dict[str, Any]] = []
                results: list[Appended] = []
                payloads: dict[str, dict[str, Any]] = {}
                policies: dict[str, dict[str, Any]] = {}
                for item in batch:
                    seq += 1
                    row = item.event_row(seq, prev, now, self._backend.durability)
                    events.append(row)
                    results.append(
                        Appended(seq=seq, hash=row["hash"], event_id=item.event_id, recorded_at=now)
                    )
                    prev = row["hash"]
                    payloads.update({r["digest"]: r for r in item.payload_rows})
                    if item.policy_row:
                        policies[item.policy_row["fingerprint"]] = item.policy_row
                if payloads:
                    conn.execute(self._insert_ignoring_duplicates(Payload), list(payloads.values()))
                if policies:
                    conn.execute(
                        self._insert_ignoring_duplicates(PolicyVersion), list(policies.values())
                    )
                conn.execute(insert(Event), events)
            return results
        except SQLAlchemyError as exc:
            reason = db_reason(exc)
            raise AppendFailed(
                f"the audit record could not be committed ({reason}).", hint=APPEND_HINT
            ) from exc
