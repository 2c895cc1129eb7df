"""Scenario 7: who may do what on a PostgreSQL audit database.

Guarantee (docs/audit.md, "Append-only enforcement"): a role given ``gateway db grant`` can
append and read but cannot UPDATE, DELETE, TRUNCATE or ALTER the audit tables; a reviewer,
given ``gateway db grant --read-only``, can list, show, verify, export and checkpoint (the
export and checkpoint record themselves as events, so reviewers' reads stay audited), and can
append nothing else - not through the store, not through the gateway (which then fails closed
before any upstream call) and not with its own SQL.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from audit import AppendFailed, AuditStore, EventDraft, EventKind
from audit.store.signing import Signer
from audit.verify import verify_log
from gateway import Gateway, Settings
from gateway.cli import main
from tests.fakes.messages_api import FakeMessagesAPI
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

FORBIDDEN = (
    "UPDATE events SET caller = 'x'",
    "DELETE FROM events",
    "TRUNCATE events",
    "UPDATE payloads SET content = 'x'",
    "DELETE FROM policies",
    "TRUNCATE payloads",
    "ALTER TABLE events ADD COLUMN note text",
    "ALTER TABLE events DISABLE TRIGGER USER",
    "DROP TABLE events",
)
# What only the reviewer is refused: the row-level security of migration 0003 and the tables
# it has no INSERT on. The application role may do these, so they are not in FORBIDDEN.
# A forged event row straight through the driver: refused before the chain guard, since a
# reviewer inserts no format-1 row itself (migration 0012).
FORGED_EVENT = (
    "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, prev_hash, hash) "
    "VALUES (99, 'e99', 'forged', 'response', now(), 'x', 'p', 'h')"
)
# What a reviewer's store hears for any other kind (migration 0012).
REVIEW_KINDS_ONLY = "records export, checkpoint and access events only"
REVIEWER_FORBIDDEN = (
    "INSERT INTO payloads (digest, size, content) VALUES ('sha256:x', 1, 'x')",
    "INSERT INTO policies (fingerprint, content) VALUES ('sha256:x', 'x')",
    "ALTER TABLE events DISABLE ROW LEVEL SECURITY",
    "DROP POLICY events_append ON events",
)


# PostgreSQL has no file beside it for a record key: each gateway is given its own.
APP_KEY = Signer.generate()
REVIEWER_KEY = Signer.generate()


def _cli(
    args: list[str], url: str, policy_dir: Path, fake: FakeMessagesAPI, key: str = ""
) -> Result:
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_CHECKPOINT_KEY": key or None,
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "ANTHROPIC_API_KEY": "sk-ant-access",
        "ANTHROPIC_BASE_URL": fake.base_url,
        # The reviewer signs its own reads' records and trusts the gateway's record key.
        "GATEWAY_RECORD_KEY": REVIEWER_KEY.seed_hex(),
        "GATEWAY_TRUSTED_KEYS": APP_KEY.public_key,
    }
    return CliRunner().invoke(main, args, env=env)


def _role(server: PostgresServer, role: str) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {role} LOGIN")


def test_app_role_appends_but_cannot_change_and_reviewer_only_reads(
    postgres_server: PostgresServer,
    pg_url: str,
    fake_api: FakeMessagesAPI,
    policy_dir: Path,
    tmp_path: Path,
) -> None:
    """Grants through the CLI, then every forbidden statement and every reviewer command."""
    db = pg_url.rsplit("/", 1)[1]
    owner = _cli(["db", "upgrade"], pg_url, policy_dir, fake_api)
    assert owner.exit_code == 0, owner.output
    for role, extra in (("gateway_app", []), ("gateway_reviewer", ["--read-only"])):
        _role(postgres_server, role)
        done = _cli(["db", "grant", role, *extra], pg_url, policy_dir, fake_api)
        assert done.exit_code == 0, done.output
    app_url = postgres_server.url(db, "gateway_app")
    reviewer_url = postgres_server.url(db, "gateway_reviewer")

    # The application role runs the gateway...
    with Gateway(
        Settings(
            policy_dir=policy_dir,
            database_url=app_url,
            anthropic_api_key="sk-ant-access",
            anthropic_base_url=fake_api.base_url,
            record_key=APP_KEY.seed_hex(),
        )
    ) as gw:
        answered = gw.complete("quant_strategy", "an idea", caller="quant-desk")
    # ...and can change nothing it wrote.
    refused = 0
    for role in ("gateway_app", "gateway_reviewer"):
        with psycopg.connect(postgres_server.dsn(db, role), autocommit=True) as conn:
            for sql in FORBIDDEN:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)
                refused += 1
    with psycopg.connect(postgres_server.dsn(db, "gateway_reviewer"), autocommit=True) as conn:
        for sql in REVIEWER_FORBIDDEN:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)
            refused += 1
        # A reviewer's own INSERT of a format-1 row is refused before the chain guard
        # (migration 0013): it records through CALL audit_review_append(...) only.
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit_review_append"):
            conn.execute(FORGED_EVENT)
        refused += 1

    # The reviewer reads, lists, shows and verifies.
    listed = _cli(["audit", "list", "--format", "jsonl"], reviewer_url, policy_dir, fake_api)
    assert listed.exit_code == 0, listed.output
    assert answered.request_id in {json.loads(x)["request_id"] for x in listed.stdout.split("\n")
                                   if x.strip()}  # fmt: skip
    shown = _cli(["audit", "show", answered.request_id], reviewer_url, policy_dir, fake_api)
    assert shown.exit_code == 0, shown.output
    verified = _cli(["audit", "verify"], reviewer_url, policy_dir, fake_api)
    assert verified.exit_code == 0, verified.output

    # The reviewer exports and checkpoints; each read is recorded before it streams or signs.
    exported = _cli(["audit", "export", "--format", "jsonl"], reviewer_url, policy_dir, fake_api)
    assert exported.exit_code == 0, exported.output
    records = [json.loads(x) for x in exported.stdout.splitlines() if x.strip()]
    assert [r["kind"] for r in records] == ["request", "response"]
    assert "recorded as seq 3" in exported.stderr
    key, head = secrets.token_hex(32), tmp_path / "head.json"
    signed = _cli(["audit", "checkpoint", "-o", str(head)], reviewer_url, policy_dir, fake_api, key)
    assert signed.exit_code == 0, signed.output
    assert json.loads(head.read_text())["seq"] == 4
    checked = _cli(
        ["audit", "verify", "--checkpoint", str(head)], reviewer_url, policy_dir, fake_api, key
    )
    assert checked.exit_code == 0, checked.output

    # The reviewer appends nothing else: not directly, and not by asking through the gateway.
    with AuditStore.open(reviewer_url) as store:
        for kind in (EventKind.REQUEST, EventKind.RESPONSE):
            with pytest.raises(AppendFailed, match=REVIEW_KINDS_ONLY):
                store.append(EventDraft(kind=kind, request_id="forged"))
    calls = len(fake_api.requests)
    asked = _cli(["ask", "quant_strategy", "sneak"], reviewer_url, policy_dir, fake_api)
    assert asked.exit_code == 4 and "Traceback" not in asked.output
    assert asked.stderr.startswith("error: ")
    assert len(fake_api.requests) == calls, "an upstream call without a committed intent"
    with AuditStore.open(pg_url) as store:
        assert verify_log(store).ok
        events = list(store.iter_events())
    assert [e.kind for e in events[2:]] == [EventKind.EXPORT, EventKind.CHECKPOINT]
    assert {e.request_id for e in events[:2]} == {answered.request_id}
    print(f"access: forbidden statements refused={refused}, reviewer records={len(events) - 2}")
