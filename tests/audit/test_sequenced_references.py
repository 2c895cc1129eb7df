"""Verify's format-2 walk checks what a CACHE_HIT, REPLAY or INTEGRITY_ALERT names by seq.

As the format-1 walk does (audit.verify.lifecycle; tests/security/test_request_lifecycle.py): a
CACHE_HIT names an earlier RESPONSE of its request hash, by seq, hash and request id; a
REPLAY outcome an open intent of its run, a REPLAY's original an event of the request it
names; an alert an earlier event. Each forged event here is well formed, signed by a trusted
record key and written by the application role with INSERT alone: only the reference check
can tell. The log has a format-1 era (seqs 1-2) before format 2 (seqs 3-6, linked), so a
reference may reach back across the era or point at an event still pending integration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.canonical import canonical_bytes
from audit.store.migrate import upgrade
from audit.store.models import DefectKind
from audit.verify import verify_log
from tests.audit.test_sequenced_security import (
    WRITER,
    forge,
    integrate,
    kinds,
    role,
    trust,
    verify,
)
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

ZERO = "sha256:" + "0" * 64
H0, H1 = "sha256:" + "0a" * 32, "sha256:" + "0b" * 32


class Log:
    """seq 1-2: r0's REQUEST and RESPONSE in format 1; 3-4: r1's in format 2 (linked);
    5: r2's REQUEST and 6 its RESPONSE, both format 2 (linked)."""

    def __init__(self, url: str, app: str) -> None:
        self.url, self.app = url, app

    def hash(self, seq: int) -> str:
        with AuditStore.open(self.url) as store:
            return store.event(seq).hash

    def forge(self, kind: str, rid: str, request_hash: str, **data: Any) -> int:
        with psycopg.connect(self.app, autocommit=True) as conn:
            return forge(conn, WRITER, kind, rid, canonical_bytes(data), request_hash)


@pytest.fixture
def log(pg_url: str, postgres_server: PostgresServer) -> Iterator[Log]:
    upgrade(pg_url)
    with AuditStore.open(pg_url, signer=WRITER) as store:  # format 1
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r0", request_hash=H0))
        store.append(EventDraft(kind=EventKind.RESPONSE, request_id="r0", request_hash=H0))
    AuditStore.open(pg_url, log_format=2).close()  # format 2 from seq 3
    with AuditStore.open(pg_url, signer=WRITER) as store:
        for rid, rhash in (("r1", H1), ("r2", H0)):
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=rid, request_hash=rhash))
            store.append(EventDraft(kind=EventKind.RESPONSE, request_id=rid, request_hash=rhash))
    integrate(pg_url)
    report = verify(pg_url)
    assert report.ok and report.sequenced_from == 3, report.defects
    yield Log(pg_url, role(postgres_server, pg_url, "reference_app"))


def test_cache_hits_naming_the_right_response_in_either_era_or_pending_verify(log: Log) -> None:
    """The control: real references, to a format-1 RESPONSE, a linked format-2 one and one
    still pending integration, are not defects."""
    log.forge("cache_hit", "h1", H0, served_seq=2, served_hash=log.hash(2), served_request_id="r0")
    log.forge("cache_hit", "h2", H1, served_seq=4, served_hash=log.hash(4), served_request_id="r1")
    integrate(log.url)
    log.forge("request", "r3", H1)
    pending = log.forge("response", "r3", H1, ok=True)
    log.forge("cache_hit", "h3", H1, served_seq=pending, served_hash=log.hash(pending))
    report = verify(log.url)
    assert report.pending_integration == 3
    assert report.ok, report.defects


@pytest.mark.parametrize(
    ("named", "problem"),
    [
        pytest.param(lambda log: {"served_seq": 5, "served_hash": log.hash(5)},
                     "is a request event, not a response", id="a-request"),
        pytest.param(lambda log: {"served_seq": 1, "served_hash": log.hash(1)},
                     "is a request event, not a response", id="a-format-1-request"),
        pytest.param(lambda log: {"served_seq": 6, "served_hash": ZERO},
                     "not the sha256:", id="wrong-served-hash"),
        pytest.param(lambda log: {"served_seq": 2, "served_hash": ZERO},
                     "not the sha256:", id="wrong-served-hash-format-1"),
        pytest.param(lambda log: {"served_seq": 4, "served_hash": log.hash(4)},
                     "RESPONSE of another request hash", id="other-request-hash"),
        pytest.param(lambda log: {"served_seq": 6, "served_hash": log.hash(6),
                                  "served_request_id": "r1"},
                     "is an event of request 'r2', not 'r1'", id="other-request-id"),
        pytest.param(lambda log: {"served_seq": 99, "served_hash": ZERO},
                     "is not an earlier event", id="a-later-seq"),
        pytest.param(lambda log: {"served_hash": log.hash(6)},
                     "names no served_seq", id="unnamed"),
        pytest.param(lambda log: {"served_seq": "6", "served_hash": log.hash(6)},
                     "is not a seq", id="not-a-seq"),
    ],
)  # fmt: skip
def test_a_cache_hit_must_name_an_earlier_response_of_its_hash(
    log: Log, named: Any, problem: str
) -> None:
    seq = log.forge("cache_hit", "hit", H0, **named(log))
    integrate(log.url)
    report = verify(log.url)
    assert [(d.seq, d.kind) for d in report.defects] == [(seq, DefectKind.BAD_REFERENCE)]
    assert problem in report.defects[0].detail, report.defects


def test_a_cache_hit_naming_a_hole_is_found_while_pending(log: Log) -> None:
    """Not linked yet, naming a seq the integrator has not voided yet (no event): found
    before integration, as any pending event is checked."""
    with psycopg.connect(log.app, autocommit=True) as conn:
        hole = int(conn.execute("SELECT nextval('events_seq')").fetchone()[0])  # type: ignore[index]
    seq = log.forge("cache_hit", "hit", H0, served_seq=hole, served_hash=ZERO)
    report = verify(log.url)
    assert (seq, DefectKind.BAD_REFERENCE) in kinds(report), report.defects
    assert any(f"served_seq {hole} names no event" in d.detail for d in report.defects)


def test_an_integrity_alert_must_name_an_earlier_event(log: Log) -> None:
    log.forge("integrity_alert", "a1", H0, served_seq=2, check="served_answer")
    later = log.forge("integrity_alert", "a2", H0, served_seq=40, check="served_answer")
    unnamed = log.forge("integrity_alert", "a3", H0, check="served_answer")
    log.forge("integrity_alert", "a4", H0, check="content_conflict")  # names none: fine
    integrate(log.url)
    report = verify(log.url)
    found = [(d.seq, d.kind) for d in report.defects]
    assert found == [(later, DefectKind.BAD_REFERENCE), (unnamed, DefectKind.BAD_REFERENCE)]


def test_replay_events_name_their_intent_and_the_original_request(log: Log) -> None:
    """A replay run that began in format 1 ends in format 2 (the intent is carried over
    from the format-1 walk); forged outcomes name a REQUEST as their intent, an intent of
    another run, or an original of another request."""
    intent = log.forge("replay", "run", H0, phase="intent", original_seq=1,
                       original_request_id="r0")  # fmt: skip
    good = log.forge("replay", "run", H0, phase="outcome", intent_seq=intent, original_seq=1,
                     original_request_id="r0")  # fmt: skip
    not_intent = log.forge("replay", "run", H0, phase="outcome", intent_seq=5, original_seq=1,
                           original_request_id="r0")  # fmt: skip
    other = log.forge("replay", "run", H0, phase="intent", original_seq=3,
                      original_request_id="r0")  # fmt: skip
    again = log.forge("replay", "run", H0, phase="outcome", intent_seq=intent, original_seq=1,
                      original_request_id="r0")  # fmt: skip
    integrate(log.url)
    report = verify(log.url)
    assert [(d.seq, d.kind) for d in report.defects] == [
        (not_intent, DefectKind.BAD_REFERENCE),
        (other, DefectKind.BAD_REFERENCE),
        (again, DefectKind.BAD_REFERENCE),
    ], report.defects
    assert good == intent + 1
    assert "intent_seq 5 is not an open intent" in report.defects[0].detail
    assert "is an event of request 'r1', not 'r0'" in report.defects[1].detail


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_replay_and_a_request_begun_in_format_1_end_in_format_2(pg_url: str, jobs: int) -> None:
    """Open intents are carried from the format-1 walk into the format-2 one (from the
    one-process walk and from the range walk's workers alike): a REPLAY outcome, an attempt
    of a replay, and a RESPONSE whose intents were written before the switch are no
    defects (the lookups alone would call the replay's a bad reference)."""
    upgrade(pg_url)
    with AuditStore.open(pg_url, signer=WRITER) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r0", request_hash=H0))
        store.append(EventDraft(kind=EventKind.RESPONSE, request_id="r0", request_hash=H0))
        intent = store.append(
            EventDraft(kind=EventKind.REPLAY, request_id="run", request_hash=H0,
                       data={"phase": "intent", "original_seq": 1, "original_request_id": "r0"})
        )  # fmt: skip
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1", request_hash=H1))
    AuditStore.open(pg_url, log_format=2).close()
    with AuditStore.open(pg_url, signer=WRITER) as store:
        store.append(
            EventDraft(kind=EventKind.ATTEMPT_FAILED, request_id="run", request_hash=H0,
                       data={"status": 500})
        )  # fmt: skip
        store.append(
            EventDraft(kind=EventKind.REPLAY, request_id="run", request_hash=H0,
                       data={"phase": "outcome", "intent_seq": intent.seq, "original_seq": 1,
                             "original_request_id": "r0"})
        )  # fmt: skip
        store.append(EventDraft(kind=EventKind.RESPONSE, request_id="r1", request_hash=H1))
    integrate(pg_url)
    with AuditStore.open(pg_url) as store:
        report = verify_log(store, trust=trust(), jobs=jobs)
    assert report.sequenced_from == 5
    assert report.ok, report.defects
