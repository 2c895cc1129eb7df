"""Content planted under the digest of a request body before the request is made. Unsealed,
it would stop the request being recorded (the store refuses other bytes under a digest it
holds, with an integrity alert: the store-level behaviour, tests/audit). The gateway seals
every payload under a random per-request salt (audit.sealing), so nobody can know the
digest ahead: the request is recorded and answered, the planted row stays unreferenced, and
the log verifies."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from audit import AuditStore, EventKind
from audit.canonical import digest
from audit.verify import verify_log
from gateway import Gateway
from gateway.request import Request
from tests.gateway.conftest import MakeGateway, db_path, make_gateway, policy_dir  # noqa: F401

PROMPT = "The reviewer reads the"


def test_a_planted_request_body_cannot_stand_in_for_a_sealed_one(
    make_gateway: MakeGateway,  # noqa: F811
    db_path: Path,  # noqa: F811
) -> None:
    gw: Gateway = make_gateway(offline=True)
    gw.complete("offline_demo", "an earlier question", caller="desk")  # the database exists
    prepared = gw._core.pipeline.prepare(Request("offline_demo", prompt=PROMPT, caller="desk"))
    wire = gw._core.provider(prepared).wire_bytes(prepared.body)
    with sqlite3.connect(db_path) as conn:  # whoever can write the file, ahead of the request
        conn.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (?, ?, ?)",
            (digest(wire), 5, b"other"),
        )
    answered = gw.complete("offline_demo", PROMPT, caller="desk")
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        events = list(store.iter_events())
        report = verify_log(store)
        [request] = [
            e for e in events if e.request_id == answered.request_id and e.kind == "request"
        ]
        assert store.payload(request.payload_digests["request_body"]) == wire
    assert request.payload_digests["request_body"] != digest(wire)
    assert not [e for e in events if e.kind is EventKind.INTEGRITY_ALERT]
    assert report.ok, report.defects
