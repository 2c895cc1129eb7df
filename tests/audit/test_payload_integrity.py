"""Payload bytes are checked against their digest on every read, and odd stored types do not
crash verify.

A hand-edited ``payloads.content`` must never be served (the gateway's replay cache reads
answers through ``AuditStore.payload``), and a ``replace()`` run on it in SQLite, which turns
the BLOB into TEXT, must be reported by verify rather than crash it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import AuditStore, AuditStoreError, ContentMismatch, DefectKind
from audit.verify import verify_log
from gateway import Gateway, Settings
from gateway.errors import AuditWriteError
from tests.audit.conftest import Raw, fill
from tests.fakes.messages_api import FakeMessagesAPI

SHIPPED = Path(__file__).resolve().parents[2] / "policies"


def _response_ref(store: AuditStore) -> str:
    return store.event(2).payload_digests["response_body"]


def test_payload_refuses_bytes_that_do_not_hash_to_the_digest(store: AuditStore, raw: Raw) -> None:
    fill(store, requests=1)
    ref = _response_ref(store)
    assert store.payload(ref) == b'{"answer": 0}'
    raw.unguard()
    raw.execute("UPDATE payloads SET content = ? WHERE digest = ?", (b'{"answer": 666}', ref))
    with pytest.raises(ContentMismatch, match=ref) as caught:
        store.payload(ref)
    assert isinstance(caught.value, AuditStoreError)
    assert "666" not in str(caught.value)  # names digests, never the content
    assert "\n" not in str(caught.value)


def test_payload_rewritten_as_text_is_reported_not_crashed_on(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url) as store:
        fill(store, requests=2)
        raw = Raw(url)
        raw.unguard()
        # what someone "fixing" an answer by hand does: the BLOB comes back as TEXT
        raw.execute("UPDATE payloads SET content = replace(content, 'answer', 'verdict')")
        assert raw.execute("SELECT DISTINCT typeof(content) FROM payloads")[0][0] == "text"
        raw.execute("UPDATE policies SET content = replace(content, 'compliance', 'anything')")
        raw.close()
        report = verify_log(store)
        assert not report.ok
        mismatched = {d.seq for d in report.defects if d.kind == DefectKind.CONTENT_MISMATCH}
        assert {1, 2, 3, 4} <= mismatched  # policies at 1 and 3, responses at 2 and 4
        with pytest.raises(ContentMismatch):
            store.payload(_response_ref(store))


def test_payload_stored_as_text_with_the_same_bytes_still_reads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url) as store:
        fill(store, requests=1)
        raw = Raw(url)
        raw.unguard()
        raw.execute("UPDATE payloads SET content = replace(content, 'x', 'x')")  # type only
        raw.close()
        assert verify_log(store).ok  # the bytes are the bytes that were hashed
        assert store.payload(_response_ref(store)) == b'{"answer": 0}'
        assert store.policy_content(store.event(1).policy_fingerprint or "") is not None


def test_gateway_never_serves_a_tampered_cached_answer(
    tmp_path: Path, fake_api: FakeMessagesAPI
) -> None:
    db = tmp_path / "audit.db"
    settings = Settings(
        policy_dir=SHIPPED,
        database_url=f"sqlite:///{db}",
        anthropic_api_key="sk-ant-test-not-a-key",
        default_caller="tests",
        anthropic_base_url=fake_api.base_url,
        durability="os",
        retry_backoff_base_s=0.01,
    )
    prompt = "Transaction: pay 250 GBP to Example Ltd"
    first = Gateway(settings)
    try:
        answer = first.complete("compliance_review", prompt)
    finally:
        first.close()
    with AuditStore.open(f"sqlite:///{db}") as store:
        [response] = [e for e in store.iter_events() if e.kind == "response"]
        ref = response.payload_digests["response_body"]
    raw = Raw(f"sqlite:///{db}")
    raw.unguard()
    content = bytes(raw.execute("SELECT content FROM payloads WHERE digest = ?", (ref,))[0][0])
    forged = content.replace(answer.text.encode(), b"APPROVED")
    assert forged != content
    raw.execute("UPDATE payloads SET content = ? WHERE digest = ?", (forged, ref))
    raw.close()
    second = Gateway(settings)  # a new instance: nothing in its in-process memo
    try:
        with pytest.raises(AuditWriteError):
            second.complete("compliance_review", prompt)
    finally:
        second.close()
    assert len(fake_api.requests) == 1
