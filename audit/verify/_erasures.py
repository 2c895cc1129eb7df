"""Verify's check of the erasures: every ``erased_content`` row is named by its erasure event.

    report = with_erasures(store, report)     # defects added; content_erased, erasures filled

The walk reads a missing payload that ``erased_content`` names as erased by policy when the
erasure seq comes after the referencing event (audit.verify._verifier). That row is not in
the hash chain, so this pass proves it: the event at its seq must be an ``erasure`` event
(itself walked: hash, link, signature) whose ``erased`` list names the digest. A row planted
to excuse a deletion (the SQLite file's holder, a database owner) fails here as
``missing_content`` at the seq it names. Streamed in seq order, a page at a time: memory
stays flat however many requests were erased.

The format-2 walk (audit.verify._sequenced) asks :func:`erased_at` which of the content its
page names and does not find intact is gone under an erasure, and :func:`erased_problem`
whether that excuses it, as the format-1 walk does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, select, text

from audit.store import AuditStore
from audit.store.chain import MAX_DEFECTS
from audit.store.erasure import erased_digests, events_at
from audit.store.models import Defect, DefectKind, ErasureNote, EventKind, VerifyReport
from audit.store.schema import ERASED_CONTENT

PAGE = 1000
NOTES = 20  # erasures named in the report; the count covers all
_ERASED_AT = text(
    "SELECT e.digest, max(e.erasure_seq) FROM erased_content e WHERE e.digest = ANY(:k) "
    "AND NOT EXISTS (SELECT 1 FROM payloads p WHERE p.digest = e.digest) GROUP BY e.digest"
)


def erased_at(conn: Connection, digests: Iterable[str]) -> dict[str, int]:
    """Of ``digests`` (PostgreSQL), those with no payload row that ``erased_content`` names:
    the newest erasure seq named for each. A row still there but altered is not excused by
    one. The row itself is proven against its erasure event by :func:`with_erasures`."""
    wanted = sorted(set(digests))
    found: dict[str, int] = {}
    for at in range(0, len(wanted), PAGE):
        rows = conn.execute(_ERASED_AT, {"k": wanted[at : at + PAGE]})
        found.update((str(name), int(seq)) for name, seq in rows)
    return found


def erased_problem(ref: str, seq: int, erased: Mapping[str, int]) -> str | None:
    """Why content ``ref``, which the event at ``seq`` names and which is not stored intact,
    is a defect; None when an erasure event after that event removed it (erased by policy)."""
    erasure = erased.get(ref)
    if erasure is None:
        return f"{ref} is not stored intact"
    if erasure <= seq:
        return f"content {ref} is missing (erasure seq {erasure} precedes it)"
    return None


def with_erasures(store: AuditStore, report: VerifyReport) -> VerifyReport:
    defects: list[Defect] = []
    notes: list[ErasureNote] = []
    rows = events = 0
    after = 0
    with store.backend.reader.connect() as conn:
        while True:
            seqs = (
                conn.execute(
                    select(ERASED_CONTENT.c.erasure_seq)
                    .where(ERASED_CONTENT.c.erasure_seq > after)
                    .group_by(ERASED_CONTENT.c.erasure_seq)
                    .order_by(ERASED_CONTENT.c.erasure_seq)
                    .limit(PAGE)
                )
                .scalars()
                .all()
            )
            if not seqs:
                break
            after = seqs[-1]
            named: dict[int, list[str]] = {}
            for digest, seq in conn.execute(
                select(ERASED_CONTENT.c.digest, ERASED_CONTENT.c.erasure_seq).where(
                    ERASED_CONTENT.c.erasure_seq.in_(seqs)
                )
            ):
                named.setdefault(seq, []).append(digest)
            found = events_at(conn, seqs)
            for seq in seqs:
                event = found.get(seq)
                listed = set(erased_digests(event)) if event is not None else set()
                for digest in sorted(named[seq]):
                    rows += 1
                    if digest not in listed:
                        what = "no event" if event is None else f"a {event.kind.value} event"
                        if event is not None and event.kind is EventKind.ERASURE:
                            what = "an erasure event that does not name it"
                        defects.append(
                            Defect(
                                seq=seq,
                                kind=DefectKind.MISSING_CONTENT,
                                detail=f"content {digest} is recorded as erased at seq {seq}, "
                                f"but that is {what}: removed without an erasure (tampering)",
                            )
                        )
                if event is not None and event.kind is EventKind.ERASURE:
                    events += 1
                    if len(notes) < NOTES:
                        notes.append(
                            ErasureNote(
                                request_id=event.request_id, seq=seq, erased=len(named[seq])
                            )
                        )
    update: dict[str, object] = {
        "content_erased": rows,
        "erasure_events": events,
        "erasures": tuple(notes),
    }
    if defects:
        merged = sorted([*report.defects, *defects], key=lambda d: d.seq or 0)[:MAX_DEFECTS]
        update |= {"ok": False, "defects": tuple(merged)}
    return report.model_copy(update=update)
