"""Audit-store fixtures: a migrated database on each backend, and raw access for tampering.

``any_url`` runs a test once on a SQLite file and once on a fresh PostgreSQL database.
``Raw`` is the attacker (or the hand with sqlite3): plain driver connections that bypass the
store, with ``unguard()`` to switch the append-only triggers off the way an owner could.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from audit import AuditStore, EventDraft, EventKind
from audit.store.migrate import upgrade
from audit.store.signing import Signer


class Raw:
    """Driver-level access to an audit database, outside the store and its guards."""

    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            self.conn: Any = sqlite3.connect(parsed.database or "", isolation_level=None)
        else:
            self.conn = psycopg.connect(
                host=parsed.host, port=parsed.port, dbname=parsed.database,
                user=parsed.username, autocommit=True,
            )  # fmt: skip

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.dialect == "postgresql":
            sql = sql.replace("?", "%s")
        cur = self.conn.execute(sql, params)
        try:
            return [tuple(r) for r in cur.fetchall()]
        except (sqlite3.Error, psycopg.ProgrammingError):
            return []

    def unguard(self) -> None:
        """What the file's owner or a superuser can always do: switch the triggers off."""
        if self.dialect == "postgresql":
            self.execute("SET session_replication_role = replica")
            return
        names = self.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        for (name,) in names:
            self.execute(f"DROP TRIGGER {name}")

    def body(self, seq: int) -> bytes:
        return bytes(self.execute("SELECT body FROM events WHERE seq = ?", (seq,))[0][0])

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'audit.db'}"
    url: str = request.getfixturevalue("pg_url")
    upgrade(url)  # PostgreSQL is never migrated implicitly
    return url


@pytest.fixture
def store(any_url: str) -> Iterator[AuditStore]:
    with AuditStore.open(any_url) as opened:
        yield opened


@pytest.fixture
def raw(any_url: str, store: AuditStore) -> Iterator[Raw]:
    handle = Raw(any_url)
    yield handle
    handle.close()


POLICY = {"task": "compliance_review", "model": {"id": "claude-sonnet-4-6"}}
# A gateway's record key for logs that `audit prove` and `tree-head` sign over: they vouch
# only for events a trusted record key signed (GATEWAY_TRUSTED_KEYS = RECORD.public_key).
RECORD = Signer.from_text("22" * 32)


def fill(store: AuditStore, requests: int = 3) -> None:
    """A small, realistic log: each request has intent, outcome, payloads and a policy."""
    from audit.canonical import canonical_digest

    fingerprint = canonical_digest(POLICY)
    for n in range(requests):
        common = {
            "request_id": f"req-{n}",
            "task": "compliance_review",
            "caller": "payments-svc",
            "policy_fingerprint": fingerprint,
            "request_hash": f"sha256:{n:064x}",
        }
        store.append(
            EventDraft(
                kind=EventKind.REQUEST,
                data={"n": n},
                payloads={"request_body": f'{{"prompt": {n}}}'.encode()},
                policy_content=POLICY,
                **common,
            )
        )
        store.append(
            EventDraft(
                kind=EventKind.RESPONSE,
                data={"n": n, "ok": True},
                payloads={"response_body": f'{{"answer": {n}}}'.encode()},
                **common,
            )
        )
