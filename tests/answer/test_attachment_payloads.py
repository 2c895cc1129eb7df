"""An attachment's bytes are stored once, content-addressed, however many requests send it;
each request body is restored from its record byte for byte, and every reader of the body
(replay --verify, audit show --content, a content export) sees exactly what was sent."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from click.testing import CliRunner, Result

from audit import AuditStore, EventKind, StoredEvent
from audit.canonical import digest
from audit.sealing import is_sealed, opened
from audit.store.migrate import upgrade
from audit.verify import verify_log
from gateway import Gateway, Settings
from gateway._attachment_payloads import restore, restored, stored_payloads
from gateway.cli import main
from gateway.keys import record_signer
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import MakeGateway, events
from tests.replay.helpers import replay

# A PDF large enough that storing it twice shows in the payload bytes; 3n + 1 bytes, so its
# base64 ends in "==" and has padding bits to make non-canonical.
PDF = b"%PDF-1.7\n" + hashlib.sha256(b"prospectus").digest() * 6000 + b"\n%%EOF\n"
PDF = PDF + b"\n" * ((1 - len(PDF)) % 3)
assert len(PDF) % 3 == 1


def _asking(question: str, data: str) -> list[dict[str, Any]]:
    source = {"type": "base64", "media_type": "application/pdf", "data": data}
    document = {"type": "document", "source": source, "title": "Prospectus"}
    return [{"role": "user", "content": [document, {"type": "text", "text": question}]}]


def _b64(pdf: bytes = PDF) -> str:
    return base64.b64encode(pdf).decode()


def _non_canonical(pdf: bytes = PDF) -> str:
    """The same bytes in base64 whose unused padding bits are set: it decodes to ``pdf``, but
    re-encoding those bytes gives other text."""
    text = _b64(pdf)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[alphabet.index(text[-3]) + 1]
    changed = text[:-3] + last + "=="
    assert base64.b64decode(changed, validate=True) == pdf and changed != text
    return changed


def _payload_rows(db_path: Path) -> list[tuple[str, bytes]]:
    with sqlite3.connect(db_path) as db:
        return [(d, bytes(c)) for d, c in db.execute("SELECT digest, content FROM payloads")]


def _requests(db_path: Path) -> list[StoredEvent]:
    return [e for e in events(db_path) if e.kind == EventKind.REQUEST]


def _restored(db_path: Path, event: StoredEvent, name: str = "request_body") -> bytes:
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        return restored(store, event, name)


def _cli(db_path: Path, *args: str) -> Result:
    env = {"GATEWAY_DATABASE_URL": f"sqlite:///{db_path}"}
    return CliRunner().invoke(main, list(args), env=env)


def test_the_pdf_is_stored_once_per_request_and_sealed(
    gw: Gateway, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    gw.complete("prospectus_summary", messages=_asking("Summarise the risks.", _b64()))
    after_one = sum(len(c) for _, c in _payload_rows(db_path))
    gw.complete("prospectus_summary", messages=_asking("Summarise the fees.", _b64()))
    rows = _payload_rows(db_path)
    # One sealed row per request (audit.sealing: a salt per request, so no digest of the
    # file confirms it once erased); none keyed by the file's plain digest.
    assert len([d for d, c in rows if opened(c) == PDF and is_sealed(c)]) == 2
    assert digest(PDF) not in {d for d, _ in rows}
    assert not [d for d, c in rows if _b64().encode() in c]  # no body holds it as base64
    grew = sum(len(c) for _, c in rows) - after_one
    # the second request added the file once (its REQUEST and RESPONSE share the row)
    assert grew < len(PDF) + len(PDF) // 4, grew

    first, second = _requests(db_path)
    for event, sent in zip((first, second), fake_api.requests, strict=True):
        assert event.payload_digests["attachment.1"] != digest(PDF)
        body = _restored(db_path, event)
        assert body == sent.body  # exactly the bytes the provider received
        assert digest(body) == digest(sent.body)
    # The RESPONSE's copy of the bytes put on the wire is stored the same way, in its row.
    (response, _) = [e for e in events(db_path) if e.kind == EventKind.RESPONSE]
    assert response.payload_digests["attachment.1"] == first.payload_digests["attachment.1"]
    assert _restored(db_path, response, "request_wire") == fake_api.requests[0].body


def test_both_requests_verify_show_and_export_with_their_pdf(
    gw: Gateway, db_path: Path, tmp_path: Path
) -> None:
    ids = [
        gw.complete("prospectus_summary", messages=_asking(q, _b64())).request_id
        for q in ("Summarise the risks.", "Summarise the fees.")
    ]
    shown = _cli(db_path, "audit", "show", ids[0], "--content", "--reviewer", "a.auditor",
                 "--format", "json")  # fmt: skip
    assert shown.exit_code == 0, shown.output
    messages = json.loads(shown.stdout)["content"]["messages"]
    assert messages == _asking("Summarise the risks.", _b64())

    path = tmp_path / "export.jsonl"
    exported = _cli(db_path, "audit", "export", "-o", str(path), "--reviewer", "a.auditor",
                    "--with-content")  # fmt: skip
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    contents = [r["content"] for r in rows if r["kind"] == "request"]
    assert [c["messages"][0]["content"][0]["source"]["data"] for c in contents] == [_b64()] * 2
    signer = record_signer(Settings(database_url=f"sqlite:///{db_path}"), create=False)
    assert signer is not None
    key = tmp_path / "record.pub"
    key.write_text(signer.public_key + "\n")
    checked = CliRunner().invoke(
        main,
        ["audit", "verify", "--export", str(path), "--public-key", str(key), "--format", "json"],
        env={"GATEWAY_DATABASE_URL": "sqlite:////nonexistent/none.db"},
    )
    assert checked.exit_code == 0, checked.output

    # Replay last: its helper records unsigned REPLAY events, which the export would not trust.
    report = replay(f"sqlite:///{db_path}", *ids)
    assert [r.outcome.value for r in report.requests] == ["passed", "passed"], report
    for row in report.requests:
        assert all(c.ok for c in row.checks), [c for c in row.checks if not c.ok]


def test_non_canonical_base64_stays_inline_and_restores(
    gw: Gateway, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    text = _non_canonical()
    result = gw.complete("prospectus_summary", messages=_asking("Summarise.", text))
    (request,) = _requests(db_path)
    assert set(request.payload_digests) == {"request_body"}
    assert request.data["attachments"][0]["digest"] == digest(PDF)
    assert _restored(db_path, request) == fake_api.requests[0].body
    assert text.encode() in fake_api.requests[0].body
    report = replay(f"sqlite:///{db_path}", result.request_id)
    assert report.requests[0].outcome.value == "passed"


def test_a_tampered_attachment_is_reported_by_every_reader(gw: Gateway, db_path: Path) -> None:
    rid = gw.complete("prospectus_summary", messages=_asking("Summarise.", _b64())).request_id
    (request,) = _requests(db_path)
    ref = request.payload_digests["attachment.1"]  # sealed: not the file's plain digest
    with sqlite3.connect(db_path) as db:  # as the database's owner could: triggers off
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            db.execute(f"DROP TRIGGER {name}")
        (stored,) = db.execute("SELECT content FROM payloads WHERE digest = ?", (ref,)).fetchone()
        altered = bytes(stored)[:-8] + b"altered\n"
        db.execute("UPDATE payloads SET content = ? WHERE digest = ?", (altered, ref))
    report = replay(f"sqlite:///{db_path}", rid)
    assert report.requests[0].outcome.value != "passed"
    failed = [c.name for c in report.requests[0].checks if not c.ok]
    assert "payload:attachment.1" in failed, failed

    shown = _cli(db_path, "audit", "show", rid, "--content", "--reviewer", "a.auditor")
    assert shown.exit_code != 0
    assert "attachment.1" in shown.output and "Traceback" not in shown.output
    assert _b64()[:40] not in shown.output

    verified = _cli(db_path, "audit", "verify", "--format", "json")
    assert verified.exit_code != 0
    assert ref in verified.output


def test_a_body_already_holding_the_marker_is_stored_whole() -> None:
    # Text that spells the marker (a NUL, then "attachment:") would make restoring ambiguous.
    question = "\x00attachment:sha256:" + "0" * 64
    body = {"model": "m", "messages": _asking(question, _b64())}
    wire = json.dumps(body).encode()
    assert stored_payloads("request_body", wire) == {"request_body": wire}


def test_the_same_file_twice_in_one_body_is_one_attachment_payload() -> None:
    body = {"model": "m", "messages": _asking("a", _b64()) + _asking("b", _b64())}
    wire = json.dumps(body, separators=(",", ":")).encode()
    payloads = stored_payloads("request_body", wire)
    assert set(payloads) == {"request_body", "attachment.1"}
    assert payloads["attachment.1"] == PDF
    assert payloads["request_body"].count(b'"\\u0000attachment:' + digest(PDF).encode()) == 2
    assert len(payloads["request_body"]) < 1000


@pytest.mark.postgres
def test_on_postgresql_the_pdf_is_one_sealed_row_a_request_and_both_bodies_restore(
    make_gateway: MakeGateway, pg_url: str, fake_api: FakeMessagesAPI
) -> None:
    upgrade(pg_url)
    gw = make_gateway(database_url=pg_url, record_key="44" * 32)
    for question in ("Summarise the risks.", "Summarise the fees."):
        gw.complete("prospectus_summary", messages=_asking(question, _b64()))
    engine = sqlalchemy.create_engine(pg_url)
    with engine.connect() as db:
        contents = [
            bytes(c) for (c,) in db.execute(sqlalchemy.text("SELECT content FROM payloads"))
        ]
    engine.dispose()
    assert [opened(c) for c in contents if is_sealed(c)].count(PDF) == 2  # one per request
    assert PDF not in contents
    assert not [c for c in contents if _b64().encode() in c]
    with AuditStore.open(pg_url) as store:
        requests = list(store.iter_events(kind=EventKind.REQUEST))
        bodies = [restored(store, e, "request_body") for e in requests]
        assert verify_log(store).ok
    assert bodies == [r.body for r in fake_api.requests]


def test_an_image_a_tool_result_carries_is_stored_on_its_own() -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    image = {"type": "base64", "media_type": "image/png", "data": _b64(png)}
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "image", "source": image}],
    }
    body = {"model": "m", "messages": [{"role": "user", "content": [result]}]}
    wire = json.dumps(body).encode()
    payloads = stored_payloads("request_body", wire)
    assert payloads["attachment.1"] == png
    assert restore(payloads["request_body"], {digest(png): png}.__getitem__) == wire
