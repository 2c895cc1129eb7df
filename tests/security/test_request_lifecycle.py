"""Verify checks each request's life: outcomes follow their REQUEST and end it once, and what
a CACHE_HIT, REPLAY or INTEGRITY_ALERT names by seq is what it claims (guarantee 12).

Each log here is signed with the store's record key, so every event is authentic and intact:
what is wrong is only how the events fit together (a writer with the key that misbehaves, or
rows re-used by someone who holds it).
"""

from __future__ import annotations

from typing import Any

import pytest

from audit import AuditStore, DefectKind, EventDraft, EventKind
from audit.store.signing import Signer
from audit.verify import verify_log
from audit.verify.lifecycle import Lifecycle

H = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


@pytest.fixture
def store(sqlite_url: str) -> Any:
    with AuditStore.open(sqlite_url, signer=Signer.generate()) as opened:
        yield opened


def add(store: AuditStore, kind: EventKind, rid: str, rhash: str | None = H, **data: Any) -> Any:
    return store.append(EventDraft(kind=kind, request_id=rid, request_hash=rhash, data=data))


def defects(store: AuditStore) -> list[tuple[int | None, DefectKind]]:
    report = verify_log(store)
    assert report.signatures_checked
    return [(d.seq, d.kind) for d in report.defects]


def test_a_whole_ordinary_life_verifies(store: AuditStore) -> None:
    add(store, EventKind.REQUEST, "r1")
    add(store, EventKind.ATTEMPT_FAILED, "r1", status=529)
    served = add(store, EventKind.RESPONSE, "r1", ok=True)
    add(store, EventKind.CACHE_HIT, "r2", served_seq=served.seq, served_hash=served.hash,
        served_request_id="r1")  # fmt: skip
    add(store, EventKind.INTEGRITY_ALERT, "r3", served_seq=served.seq)
    intent = add(store, EventKind.REPLAY, "run", phase="intent", original_seq=1,
                 original_request_id="r1")  # fmt: skip
    add(store, EventKind.ATTEMPT_FAILED, "run", status=500)
    add(store, EventKind.REPLAY, "run", phase="outcome", intent_seq=intent.seq, original_seq=1,
        original_request_id="r1")  # fmt: skip
    add(store, EventKind.REQUEST, "r4", rhash=OTHER)
    add(store, EventKind.FAILED, "r4", rhash=OTHER)
    add(store, EventKind.REQUEST, "open")  # incomplete: the process died; not a defect
    assert verify_log(store).ok


def test_an_outcome_without_a_request_is_named(store: AuditStore) -> None:
    add(store, EventKind.REQUEST, "r1")
    add(store, EventKind.RESPONSE, "r1")
    add(store, EventKind.RESPONSE, "ghost")  # no REQUEST at all
    add(store, EventKind.REQUEST, "r2")
    add(store, EventKind.FAILED, "r2", rhash=OTHER)  # a REQUEST, but of another request hash
    add(store, EventKind.ATTEMPT_FAILED, "nobody")
    assert defects(store) == [
        (3, DefectKind.ORPHAN_OUTCOME),
        (5, DefectKind.ORPHAN_OUTCOME),
        (6, DefectKind.ORPHAN_OUTCOME),
    ]


def test_an_outcome_before_its_request_is_named(store: AuditStore) -> None:
    add(store, EventKind.RESPONSE, "r1")
    add(store, EventKind.REQUEST, "r1")
    assert defects(store) == [(1, DefectKind.ORPHAN_OUTCOME)]


def test_a_second_terminal_outcome_is_named_with_the_first(store: AuditStore) -> None:
    add(store, EventKind.REQUEST, "r1")
    add(store, EventKind.RESPONSE, "r1", ok=True)
    add(store, EventKind.REQUEST, "r2")
    add(store, EventKind.FAILED, "r2")
    add(store, EventKind.RESPONSE, "r1", ok=True)  # the replay cache would serve this one
    add(store, EventKind.ATTEMPT_FAILED, "r2")  # after the request ended
    report = verify_log(store)
    assert [(d.seq, d.kind) for d in report.defects] == [
        (5, DefectKind.DUPLICATE_OUTCOME),
        (6, DefectKind.ORPHAN_OUTCOME),
    ]
    assert "already ended at seq 2 (response)" in report.defects[0].detail


@pytest.mark.parametrize(
    ("named", "problem"),
    [
        (lambda r: {"served_seq": 99, "served_hash": r.hash}, "not an earlier event"),
        (lambda r: {"served_seq": 1, "served_hash": r.hash}, "not a response"),
        (lambda r: {"served_seq": r.seq, "served_hash": H}, "not the"),
        (lambda r: {"served_seq": 5, "served_hash": r.hash}, "another request hash"),
        (lambda r: {"served_hash": r.hash}, "names no served_seq"),
        (lambda r: {"served_seq": "2", "served_hash": r.hash}, "is not a seq"),
    ],
    ids=["later", "a-request", "other-hash", "other-request-hash", "unnamed", "not-a-seq"],
)
def test_a_cache_hit_must_name_an_earlier_response_of_its_hash(
    store: AuditStore, named: Any, problem: str
) -> None:
    add(store, EventKind.REQUEST, "r1")
    served = add(store, EventKind.RESPONSE, "r1", ok=True)
    add(store, EventKind.REQUEST, "r2", rhash=OTHER)
    add(store, EventKind.REQUEST, "r3", rhash=OTHER)
    add(store, EventKind.RESPONSE, "r3", rhash=OTHER)  # seq 5: a RESPONSE of another hash
    add(store, EventKind.CACHE_HIT, "hit", **named(served))
    report = verify_log(store)
    assert [(d.seq, d.kind) for d in report.defects] == [(6, DefectKind.BAD_REFERENCE)]
    assert problem in report.defects[0].detail


def test_a_cache_hit_cannot_name_a_later_seq(store: AuditStore) -> None:
    add(store, EventKind.CACHE_HIT, "hit", served_seq=2, served_hash=H)
    add(store, EventKind.REQUEST, "r1")
    assert defects(store) == [(1, DefectKind.BAD_REFERENCE)]


def test_replay_events_name_their_intent_and_the_original_request(store: AuditStore) -> None:
    add(store, EventKind.REQUEST, "r1")
    add(store, EventKind.RESPONSE, "r1")
    add(store, EventKind.REQUEST, "r2")
    intent = add(store, EventKind.REPLAY, "run", phase="intent", original_seq=1,
                 original_request_id="r1")  # fmt: skip
    # seq 5: an outcome naming a REQUEST as its intent; seq 6: the original of another request
    add(store, EventKind.REPLAY, "run", phase="outcome", intent_seq=3, original_seq=1,
        original_request_id="r1")  # fmt: skip
    add(store, EventKind.REPLAY, "run", phase="outcome", intent_seq=intent.seq, original_seq=3,
        original_request_id="r1")  # fmt: skip
    # seq 7: the intent already has its outcome
    add(store, EventKind.REPLAY, "run", phase="outcome", intent_seq=intent.seq, original_seq=1,
        original_request_id="r1")  # fmt: skip
    assert defects(store) == [
        (5, DefectKind.BAD_REFERENCE),
        (6, DefectKind.BAD_REFERENCE),
        (7, DefectKind.BAD_REFERENCE),
    ]


def test_an_integrity_alert_names_an_earlier_event(store: AuditStore) -> None:
    add(store, EventKind.REQUEST, "r1")
    add(store, EventKind.INTEGRITY_ALERT, "r2", served_seq=1)
    add(store, EventKind.INTEGRITY_ALERT, "r3", served_seq=40)
    add(store, EventKind.INTEGRITY_ALERT, "r4")
    assert defects(store) == [(3, DefectKind.BAD_REFERENCE), (4, DefectKind.BAD_REFERENCE)]


@pytest.mark.slow  # a log of 5,000 events
def test_lifecycle_state_holds_only_open_requests(store: AuditStore) -> None:
    """Memory stays flat: a request that ended is forgotten, only incomplete ones are held."""
    for n in range(2500):
        store.append_many(
            [
                EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}", request_hash=H),
                EventDraft(kind=EventKind.RESPONSE, request_id=f"r{n}", request_hash=H),
            ]
        )
    add(store, EventKind.REQUEST, "still-open")
    assert verify_log(store).ok
    life = Lifecycle()  # what verify's walk keeps of each request's life, fed the same events
    for event in store.iter_events():
        life.feed_fields(event.seq, event.kind.value, event.request_id, event.request_hash, {})
    assert list(life.open) == [("still-open", H)]
