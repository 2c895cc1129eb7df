"""Keyed digests (docs/security.md, "What an erased request still reveals"): the request hash
an HMAC under the deployment's cache key, kept beside the record key and never in the
database; payloads sealed under a per-request salt. The cache and replay still work."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

from audit import AuditStore, EventKind
from audit.canonical import digest
from audit.sealing import is_sealed
from gateway import Gateway, Settings
from gateway.catalog import Catalog
from gateway.keys import CACHE_KEY_FILE, KEYED_PREFIX, cache_key
from gateway.replay import Outcome, Replayer, Selection

PROMPT = "Is clause 4 a conflict of interest?"


def _request(settings: Settings, request_id: str) -> object:
    with AuditStore.open(settings.database_url) as store:
        [request] = [e for e in store.events_for_request(request_id) if e.kind == EventKind.REQUEST]
    return request


def test_the_cache_key_is_beside_the_database_and_never_in_it(
    gw: Gateway, settings: Settings, db_path: Path
) -> None:
    first = gw.complete("compliance_review", PROMPT)
    again = gw.complete("compliance_review", PROMPT)
    assert again.cached and again.request_hash == first.request_hash  # still meets
    assert first.request_hash.startswith(KEYED_PREFIX)
    key_file = db_path.parent / CACHE_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    secret = key_file.read_text().strip()
    assert len(bytes.fromhex(secret)) == 32
    for name in (db_path, db_path.with_name(db_path.name + "-wal")):
        if name.exists():
            data = name.read_bytes()
            assert secret.encode() not in data and bytes.fromhex(secret) not in data
    assert "**" in repr(cache_key(settings, create=False))  # never shown


def test_every_payload_of_a_request_is_sealed_and_reads_back(
    gw: Gateway, settings: Settings, db_path: Path
) -> None:
    answer = gw.complete("compliance_review", PROMPT)
    with sqlite3.connect(db_path) as db:
        rows = [bytes(c) for (c,) in db.execute("SELECT content FROM payloads")]
    assert rows and all(is_sealed(r) for r in rows)
    with AuditStore.open(settings.database_url) as store:
        events = store.events_for_request(answer.request_id)
        for event in events:
            for ref in event.payload_digests.values():
                content = store.payload(ref)  # opened: the bytes that were sent or received
                assert not is_sealed(content) and digest(content) != ref
                assert digest(store.stored_payload(ref)) == ref


def test_replay_verify_remakes_a_keyed_hash_only_with_the_key(
    gw: Gateway, settings: Settings
) -> None:
    answer = gw.complete("compliance_review", PROMPT)
    key = cache_key(settings, create=False)
    with AuditStore.open(settings.database_url, "os") as store:
        with_key = Replayer(store, Catalog.load(), cache_key=key)
        report = with_key.run(with_key.prepare(Selection(request_ids=(answer.request_id,))))
        [row] = report.requests
        assert row.outcome is Outcome.PASSED, [c for c in row.checks if not c.ok]
        without = Replayer(store, Catalog.load())
        report = without.run(without.prepare(Selection(request_ids=(answer.request_id,))))
        [row] = report.requests
    failed = [c for c in row.checks if not c.ok]
    assert [c.name for c in failed] == ["request_hash"]
    assert "cache key" in failed[0].detail
