"""Content planted under the digest of a request body before the request is made: the
gateway refuses to record (and so to send) the request, and says so with an integrity alert,
while the log still verifies."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from audit import AuditStore, EventKind
from audit.canonical import digest
from audit.verify import verify_log
from gateway import AuditWriteError, Gateway
from gateway.request import Request
from tests.gateway.conftest import MakeGateway, db_path, make_gateway, policy_dir  # noqa: F401

PROMPT = "The reviewer reads the"


def test_a_planted_request_body_is_refused_with_an_integrity_alert(
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
    with pytest.raises(AuditWriteError, match="hold other bytes"):
        gw.complete("offline_demo", PROMPT, caller="desk")
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        events = list(store.iter_events())
        report = verify_log(store)
    [alert] = [e for e in events if e.kind is EventKind.INTEGRITY_ALERT]
    assert alert.data["check"] == "content_conflict"
    assert alert.data["refused_kind"] == "request" and alert.data["digests"] == [digest(wire)]
    assert not [
        e for e in events if e.kind is EventKind.REQUEST and e.request_id == alert.request_id
    ]
    assert report.ok, report.defects
