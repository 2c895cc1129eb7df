"""Scenario 7: who may do what on a PostgreSQL audit database.

Guarantee (docs/audit.md, "Append-only enforcement"): a role given ``gateway db grant`` can
append and read but cannot UPDATE, DELETE, TRUNCATE or ALTER the audit tables; a role given
``gateway db grant --read-only`` can list, show and verify, and cannot append - not through
the store and not through the gateway, which then fails closed before any upstream call.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from audit import AppendFailed, AuditStore, EventDraft, EventKind
from gateway import Gateway
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


def _cli(args: list[str], url: str, policy_dir: Path, fake: FakeMessagesAPI) -> Result:
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "ANTHROPIC_API_KEY": "sk-ant-access",
        "ANTHROPIC_BASE_URL": fake.base_url,
    }
    return CliRunner().invoke(main, args, env=env)


def _role(server: PostgresServer, role: str) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {role} LOGIN")


def test_app_role_appends_but_cannot_change_and_reviewer_only_reads(
    postgres_server: PostgresServer, pg_url: str, fake_api: FakeMessagesAPI, policy_dir: Path
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
        policy_dir=policy_dir,
        database_url=app_url,
        anthropic_api_key="sk-ant-access",
        base_url=fake_api.base_url,
    ) as gw:
        answered = gw.complete("quant_strategy", "an idea")
    # ...and can change nothing it wrote.
    refused = 0
    for role in ("gateway_app", "gateway_reviewer"):
        with psycopg.connect(postgres_server.dsn(db, role), autocommit=True) as conn:
            for sql in FORBIDDEN:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)
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

    # The reviewer cannot append: not directly, and not by asking through the gateway.
    with AuditStore.open(reviewer_url) as store, pytest.raises(AppendFailed):
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="forged"))
    calls = len(fake_api.requests)
    asked = _cli(["ask", "quant_strategy", "sneak"], reviewer_url, policy_dir, fake_api)
    assert asked.exit_code == 4 and "Traceback" not in asked.output
    assert len(fake_api.requests) == calls, "an upstream call without a committed intent"
    # Export records itself before it streams (reviewer reads are audited), so a role that
    # cannot insert gets one line and exit 4 - by design, see docs/reliability.md.
    exported = _cli(["audit", "export", "--format", "jsonl"], reviewer_url, policy_dir, fake_api)
    assert exported.exit_code == 4 and exported.stderr.startswith("error: ")
    with AuditStore.open(pg_url) as store:
        assert store.verify().ok
        assert {e.request_id for e in store.iter_events()} == {answered.request_id}
    print(f"access: forbidden statements refused={refused}")
