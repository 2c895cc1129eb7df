"""Which requests' content an erasure removes, and which of their payloads it may remove.

    plan = ErasurePlan.build(store, decide)      # one streamed pass over the log
    for batch in plan.batches(200): ...          # (request, erased digests, kept digests)
    plan.unfinished()                            # erasure events whose content is still there
    plan.summary                                 # counts by task and retention class

``decide(request_event)`` says, for each REQUEST, whether its content is to be erased
(:class:`Decision`), held back by a legal hold or a regulatory minimum, or left alone.

Payload rows are content-addressed, so one row can belong to several requests (the same
prompt sent twice, the same attached file). A payload is removed only when every request
that names it is erased now or was erased before; otherwise it is *kept* and the erasure
event says so. (Sealed rows, audit.sealing, belong to one request; rows written before
sealing are the shared ones.) A REPLAY event's payloads (a live replay re-sends the
recorded prompt, and records the answer) count as the replayed request's: they go with its
content, under its erasure event. Knowing that needs every reference in the log, so the pass
writes them to a scratch SQLite database (the index lives on disk): memory stays flat
whatever the log's size. It is SQLite's own private temporary database, whose file is
unlinked as soon as it is opened: a purge killed mid-run leaves no file behind (it once
left a ``/tmp/gateway-erasure-*`` folder holding request ids and digests).
An erasure already recorded is never recorded again; its content, if a run was killed
before removing it, is listed by :meth:`unfinished` for the next run to remove.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from audit import AuditStore
from audit.store.erasure import Reference, present_payloads, references
from audit.store.models import EventKind

__all__ = ["Decision", "ErasurePlan", "Planned", "SummaryRow"]

Outcome = Literal["erase", "held", "minimum"]


class Decision(NamedTuple):
    outcome: Outcome
    label: str  # the retention class (purge) or the rule (erase)
    detail: dict[str, Any]  # what the erasure event records beside the rule, or why not


class Planned(NamedTuple):
    request_id: str
    task: str | None
    label: str
    erased: list[str]
    kept: list[str]
    detail: dict[str, Any]


@dataclass
class SummaryRow:
    task: str
    label: str
    erase: int = 0
    held: int = 0
    minimum: int = 0
    reasons: list[str] = field(default_factory=list)  # the first few refusals, one line each


_SCHEMA = (
    "CREATE TABLE requests (request_id TEXT PRIMARY KEY, task TEXT, outcome TEXT, label TEXT, "
    "detail TEXT)",
    "CREATE TABLE refs (digest TEXT, request_id TEXT)",
    "CREATE TABLE erased (request_id TEXT, seq INTEGER)",
    "CREATE TABLE erasing (seq INTEGER, digest TEXT)",
)
_INDEXES = (
    "CREATE INDEX refs_digest ON refs (digest, request_id)",
    "CREATE INDEX refs_request ON refs (request_id)",
    "CREATE INDEX erased_request ON erased (request_id)",
)
REASONS = 3


class ErasurePlan:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.summary: dict[tuple[str, str], SummaryRow] = {}

    @classmethod
    def build(
        cls, store: AuditStore, decide: Callable[[Reference], Decision | None]
    ) -> ErasurePlan:
        # "": a private on-disk temporary database (SQLITE_TMPDIR, TMPDIR, /var/tmp, ...),
        # unlinked on open, gone with the connection or the process.
        db = sqlite3.connect("", isolation_level=None)
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        for statement in _SCHEMA:
            db.execute(statement)
        plan = cls(db)
        db.execute("BEGIN")
        for ref in references(store):
            # A live replay's copy of a request's content is that request's to erase.
            owner = ref.original or ref.request_id
            for digest in set(ref.payloads):
                db.execute("INSERT INTO refs VALUES (?, ?)", (digest, owner))
            if ref.kind == EventKind.ERASURE.value:
                db.execute("INSERT INTO erased VALUES (?, ?)", (ref.request_id, ref.seq))
                db.executemany(
                    "INSERT INTO erasing VALUES (?, ?)", [(ref.seq, d) for d in ref.erased]
                )
            elif ref.kind == EventKind.REQUEST.value:
                decision = decide(ref)
                if decision is not None:
                    db.execute(
                        "INSERT OR IGNORE INTO requests VALUES (?, ?, ?, ?, ?)",
                        (
                            ref.request_id,
                            ref.task,
                            decision.outcome,
                            decision.label,
                            json.dumps(decision.detail),
                        ),
                    )
        for statement in _INDEXES:
            db.execute(statement)
        db.execute("COMMIT")
        plan._summarise()
        return plan

    def _summarise(self) -> None:
        rows = self._db.execute(
            "SELECT coalesce(task, '-'), label, outcome, count(*) FROM requests "
            "WHERE request_id NOT IN (SELECT request_id FROM erased) "
            "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        )
        for task, label, outcome, n in rows.fetchall():
            row = self.summary.setdefault((task, label), SummaryRow(task, label))
            setattr(row, outcome, n)
        refused = self._db.execute(
            "SELECT coalesce(task, '-'), label, request_id, detail FROM requests "
            "WHERE outcome != 'erase' AND request_id NOT IN (SELECT request_id FROM erased) "
            "ORDER BY rowid"
        )
        for task, label, request_id, detail in refused:
            row = self.summary[(task, label)]
            if len(row.reasons) < REASONS:
                row.reasons.append(f"{request_id}: {json.loads(detail).get('why', '')}")

    def refusals(self) -> Iterator[tuple[str, str]]:
        """(request id, why) of each selected request that may not be erased."""
        for request_id, detail in self._db.execute(
            "SELECT request_id, detail FROM requests WHERE outcome != 'erase' "
            "AND request_id NOT IN (SELECT request_id FROM erased) ORDER BY rowid"
        ):
            yield request_id, str(json.loads(detail).get("why", ""))

    def already_erased(self, request_id: str) -> int | None:
        row = self._db.execute(
            "SELECT min(seq) FROM erased WHERE request_id = ?", (request_id,)
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def batches(self, size: int) -> Iterator[list[Planned]]:
        """The requests to erase now, ``size`` at a time, each with the payloads it removes
        and those it keeps (named by a request that is not being erased)."""
        db = self._db
        cursor = db.execute(
            "SELECT request_id, task, label, detail FROM requests WHERE outcome = 'erase' "
            "AND request_id NOT IN (SELECT request_id FROM erased) ORDER BY rowid"
        )
        while chunk := cursor.fetchmany(size):
            batch = []
            for request_id, task, label, detail in chunk:
                digests = [
                    d
                    for (d,) in db.execute(
                        "SELECT DISTINCT digest FROM refs WHERE request_id = ?", (request_id,)
                    )
                ]
                kept = [d for d in digests if self._needed_elsewhere(d)]
                erased = [d for d in digests if d not in kept]
                batch.append(Planned(request_id, task, label, erased, kept, json.loads(detail)))
            yield batch

    def _needed_elsewhere(self, digest: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM refs r WHERE r.digest = ? AND NOT EXISTS (SELECT 1 FROM requests q "
            "WHERE q.request_id = r.request_id AND q.outcome = 'erase') AND NOT EXISTS "
            "(SELECT 1 FROM erased e WHERE e.request_id = r.request_id) LIMIT 1",
            (digest,),
        ).fetchone()
        return row is not None

    def unfinished(
        self, store: AuditStore, size: int = 500
    ) -> Iterator[list[tuple[int, list[str]]]]:
        """Erasure events (seq, digests) whose named content still has rows: a run killed
        between recording an erasure and removing its content. ``size`` events at a time."""
        cursor = self._db.execute("SELECT seq, digest FROM erasing ORDER BY seq")
        while rows := cursor.fetchmany(size * 4):
            present = present_payloads(store, [d for _, d in rows])
            if not present:
                continue
            grouped: dict[int, list[str]] = {}
            for seq, digest in rows:
                if digest in present:
                    grouped.setdefault(seq, []).append(digest)
            yield list(grouped.items())

    def close(self) -> None:
        self._db.close()
