"""The gateway on PostgreSQL: the same records, cache and refusals as on SQLite."""

from __future__ import annotations

import pytest

from audit import AuditStore, EventKind
from audit.store.migrate import upgrade
from audit.verify import verify_log
from gateway import AuditUnavailable, PolicyViolation
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import API_KEY, MakeGateway

pytestmark = pytest.mark.postgres

PROMPT = "Transaction: pay 42 CHF to Example AG"
RECORD_KEY = "44" * 32  # PostgreSQL has no file beside it: the record key is configured


def test_a_database_whose_schema_is_behind_is_refused_naming_the_command(
    make_gateway: MakeGateway, pg_url: str
) -> None:
    with pytest.raises(AuditUnavailable) as caught:
        make_gateway(database_url=pg_url, record_key=RECORD_KEY)
    assert "gateway db upgrade" in str(caught.value)


def test_requests_hits_and_rejections_are_recorded_and_verify(
    make_gateway: MakeGateway, pg_url: str, fake_api: FakeMessagesAPI
) -> None:
    upgrade(pg_url)
    gw = make_gateway(database_url=pg_url, record_key=RECORD_KEY)
    fake_api.script(Reply.error(529), Reply.ok(text="No finding."))
    first = gw.complete("compliance_review", PROMPT, caller="payments-svc")
    second = make_gateway(database_url=pg_url, record_key=RECORD_KEY).complete(
        "compliance_review", PROMPT, caller="payments-svc"
    )
    with pytest.raises(PolicyViolation):
        gw.complete("compliance_review", PROMPT, overrides={"temperature": 1})

    assert (first.text, second.cached, second.text) == ("No finding.", True, "No finding.")
    assert len(fake_api.requests) == 2
    with AuditStore.open(pg_url) as store:
        kinds = [e.kind for e in store.iter_events()]
        assert kinds == [
            EventKind.REQUEST,
            EventKind.ATTEMPT_FAILED,
            EventKind.RESPONSE,
            EventKind.CACHE_HIT,
            EventKind.REJECTED,
        ]
        request = store.events_for_request(first.request_id)[0]
        assert store.payload(request.payload_digests["request_body"]) == fake_api.requests[-1].body
        assert verify_log(store).ok
        assert API_KEY.encode() not in b"".join(e.body for e in store.iter_events())


def test_audit_threads_never_outnumber_the_store_connections(pg_url: str) -> None:
    # Every audit thread busy at once, and the committer thread, each hold a pooled
    # connection: the pool must have one for each, or a thread waits for the pool's time-out
    # (64 threads against 40 connections before).
    from gateway.request._threads import MAX_THREADS

    upgrade(pg_url)
    with AuditStore.open(pg_url) as store:
        pool = store.backend.writer.pool
        capacity = pool.size() + pool._max_overflow  # type: ignore[attr-defined]
    assert capacity > MAX_THREADS + 1
