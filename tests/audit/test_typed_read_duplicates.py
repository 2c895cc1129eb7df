"""A body that gives ``data`` twice, the first a value ``json`` refuses and the last a fine
object, is a bad_body, as it always was: verify's typed read (audit.verify._ordinary_body) keeps
msgspec's last value and had checked only that one, so verify passed the row (found by a
review). SQLite with the triggers dropped, and PostgreSQL through the chain guard as the
reviewer role (jsonb keeps the last duplicate too), signed by a trusted key."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from audit import AuditStore, DefectKind, EventDraft, EventKind
from audit.store.chain import link_hash
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify import verify_log
from tests.audit.test_chain_guard import _head, _row
from tests.audit.test_postgres_roles import _create_role, _owned_database
from tests.support.postgres import PostgresServer
from tests.support.reviewer_rows import review_append

FIRST_DATA = {
    "invalid_utf8": b'{"a":"\xff"}',
    "too_deep": b"[" * 200 + b"]" * 200,
    "long_int": b"1" * 5000,
}


@pytest.mark.parametrize("first", sorted(FIRST_DATA))
@pytest.mark.parametrize("signed", [False, True])
def test_a_bad_first_data_member_is_a_bad_body(tmp_path: Path, first: str, signed: bool) -> None:
    signer = Signer.from_text("11" * 32)  # the attacker holds a trusted key (a reviewer's gateway)
    path = tmp_path / "a.db"
    url = f"sqlite:///{path}"
    with AuditStore.open(url, "os", signer=signer) as store:
        for n in range(3):
            store.append(EventDraft(kind=EventKind.EXPORT, request_id=f"e{n}"))
    with sqlite3.connect(path) as raw:
        for (name,) in list(raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")):
            raw.execute(f"DROP TRIGGER {name}")
        body, prev = raw.execute("SELECT body, prev_hash FROM events WHERE seq = 3").fetchone()
        body = bytes(body)
        assert body.startswith(b"{")
        forged = b'{"data":' + FIRST_DATA[first] + b"," + body[1:]  # the stored data comes later
        new_hash = link_hash(prev, forged)
        raw.execute(
            "UPDATE events SET body = ?, hash = ?, signature = ? WHERE seq = 3",
            (forged, new_hash, signer.sign(new_hash)),
        )
    trust = Trust(TrustedKeys.of([signer.public_key])) if signed else None
    with AuditStore.open(url, "os") as store:
        report = verify_log(store, trust=trust, jobs=1)
        shown = store.event(3).data  # what audit show / list read
    assert "unreadable" in str(shown).lower() or shown != {}, shown
    assert [(d.seq, d.kind) for d in report.defects] == [(3, DefectKind.BAD_BODY)], report


@pytest.mark.parametrize("first", [b"[" * 200 + b"]" * 200, b"9" * 5000])
@pytest.mark.postgres
def test_the_reviewer_role_cannot_hide_a_bad_first_data_member(
    postgres_server: PostgresServer, first: bytes
) -> None:
    db = _owned_database(postgres_server, "audit_owner")
    owner_url = postgres_server.url(db, "audit_owner")
    upgrade(owner_url)
    _create_role(postgres_server, "auditor")
    grant(owner_url, "auditor", read_only=True)
    gateway, reviewer = Signer.from_text("11" * 32), Signer.from_text("22" * 32)
    with AuditStore.open(owner_url, signer=gateway) as owner:
        owner.append(EventDraft(kind=EventKind.REQUEST, request_id="req1", payloads={"b": b"x"}))
    with psycopg.connect(postgres_server.dsn(db, "auditor"), autocommit=True) as conn:
        seq, prev = _head(conn)
        row = _row(seq + 1, prev)
        body = b'{"data":' + first + b"," + row["body"][1:]
        digest = link_hash(prev, body)
        review_append(
            conn,
            {**row, "body": body, "prev_hash": prev, "hash": digest,
             "signature": reviewer.sign(digest), "key_id": reviewer.key_id},
        )  # fmt: skip
    trust = Trust(TrustedKeys.of([gateway.public_key, reviewer.public_key]))
    with AuditStore.open(owner_url) as store:
        report = verify_log(store, trust=trust)
    assert [(d.seq, d.kind) for d in report.defects] == [(2, DefectKind.BAD_BODY)], report
