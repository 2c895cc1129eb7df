"""A read-only reviewer cannot hold up the gateway's format-1 appends (migration 0013).

The reviewer may append its own export, checkpoint and access records. Before 0013 it did so
in a transaction of its own, so it took the chain lock like any appender and could keep it:
``BEGIN; SELECT audit_chain_lock();`` and every append failed after its lock time-out for as
long as the reviewer wished. Now it records through a procedure that commits on the server.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.proofs import take_checkpoint
from audit.store.chain import GENESIS, event_body, link_hash
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.verify import verify_log
from tests.audit.test_postgres_roles import _create_role, _owned_database
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

ROW_COLUMNS = (
    "seq, event_id, request_id, kind, recorded_at, task, caller, policy_fingerprint, "
    "request_hash, body, prev_hash, hash, signature, key_id"
)
WHEN = datetime(2026, 12, 10, tzinfo=UTC)
BODY = event_body(
    seq=1, event_id="e-stall", request_id="r-stall", kind="access", recorded_at=WHEN,
    task=None, caller="rev", policy_fingerprint=None, request_hash=None, durability="fsync",
    data={}, payloads={}, policy_ref=None,
)  # fmt: skip
# A well-formed first row of the chain, as a reviewer's session would link it.
ROW = (1, "e-stall", "r-stall", "access", WHEN, None, "rev", None, None,
       BODY, GENESIS, link_hash(GENESIS, BODY), None, None)  # fmt: skip
ROW_SQL = ", ".join(["%s"] * len(ROW))


@pytest.fixture
def roles_db(postgres_server: PostgresServer) -> str:
    """A database owned by a plain role, an appender ``gateway_app`` and a reviewer
    ``auditor`` (the roles `gateway db grant` makes)."""
    db = _owned_database(postgres_server, "audit_owner")
    owner_url = postgres_server.url(db, "audit_owner")
    upgrade(owner_url)
    for role in ("gateway_app", "auditor"):
        _create_role(postgres_server, role)
    grant(owner_url, "gateway_app")
    grant(owner_url, "auditor", read_only=True)
    return db


def _append_in_thread(url: str) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            with AuditStore.open(url) as store:
                outcome["seq"] = store.append(
                    EventDraft(kind=EventKind.REQUEST, request_id=f"r-{time.time_ns()}")
                ).seq
        except Exception as exc:  # the test reports whatever stopped the append
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _appends_while(postgres_server: PostgresServer, db: str) -> dict[str, Any]:
    """An application append, with a 1 s lock time-out, made while the caller holds
    whatever it took."""
    thread, outcome = _append_in_thread(postgres_server.url(db, "gateway_app") + "?lock_timeout=1")
    thread.join(timeout=30)
    assert not thread.is_alive(), "the append hung"
    return outcome


def test_a_reviewer_that_takes_the_chain_lock_holds_no_append_up(
    postgres_server: PostgresServer, roles_db: str
) -> None:
    with psycopg.connect(postgres_server.dsn(roles_db, "auditor")) as conn:  # one transaction
        conn.execute("SELECT audit_chain_lock()")  # takes nothing for a reviewer
        outcome = _appends_while(postgres_server, roles_db)
    assert "seq" in outcome, outcome


def test_a_reviewer_cannot_hold_a_pending_row_at_the_head(
    postgres_server: PostgresServer, roles_db: str
) -> None:
    with psycopg.connect(postgres_server.dsn(roles_db, "auditor")) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit_review_append"):
            conn.execute(f"INSERT INTO events ({ROW_COLUMNS}) VALUES ({ROW_SQL})", ROW)
        conn.rollback()
        # The procedure inside a transaction block cannot commit: the transaction aborts,
        # and with it whatever the insert took.
        conn.execute("SELECT 1")  # BEGIN: a transaction block is open
        with pytest.raises(psycopg.errors.InvalidTransactionTermination):
            conn.execute(f"CALL public.audit_review_append({ROW_SQL})", ROW)
        outcome = _appends_while(postgres_server, roles_db)
    assert "seq" in outcome, outcome


def test_a_reviewer_cannot_call_the_privileged_insert_except_through_the_procedure(
    postgres_server: PostgresServer, roles_db: str
) -> None:
    with (
        psycopg.connect(postgres_server.dsn(roles_db, "auditor")) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="only"),
    ):
        conn.execute(f"SELECT audit_review_insert({ROW_SQL})", ROW)
    # A look-alike procedure in a schema of the reviewer's own, which does not commit.
    with psycopg.connect(postgres_server.dsn(roles_db), autocommit=True) as admin:
        admin.execute("CREATE SCHEMA mine AUTHORIZATION auditor")
    params = ", ".join(
        f"p{i} {t}" for i, t in enumerate(
            ("integer", "text", "text", "text", "timestamp with time zone", "text", "text",
             "text", "text", "bytea", "text", "text", "text", "text")
        )
    )  # fmt: skip
    args = ", ".join(f"p{i}" for i in range(len(ROW)))
    with psycopg.connect(postgres_server.dsn(roles_db, "auditor")) as conn:
        conn.execute(
            f"CREATE PROCEDURE mine.audit_review_append({params}) LANGUAGE plpgsql "
            f"AS $$ BEGIN PERFORM public.audit_review_insert({args}); END $$"
        )
        conn.commit()
        conn.execute("SET search_path = mine, public")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="only"):
            conn.execute(f"CALL audit_review_append({ROW_SQL})", ROW)


def test_a_reviewer_still_records_and_the_log_verifies(
    postgres_server: PostgresServer, roles_db: str
) -> None:
    app_url = postgres_server.url(roles_db, "gateway_app")
    with AuditStore.open(app_url) as app:
        app.append(EventDraft(kind=EventKind.REQUEST, request_id="r-1"))
    with AuditStore.open(postgres_server.url(roles_db, "auditor")) as reviewer:
        assert take_checkpoint(reviewer, None).seq == 2
        access = reviewer.append(
            EventDraft(kind=EventKind.ACCESS, request_id="access-1", data={"read": ["answer"]})
        )
        assert access.seq == 3
        with AuditStore.open(app_url) as app:
            assert app.append(EventDraft(kind=EventKind.REQUEST, request_id="r-2")).seq == 4
        # The head moved on under the reviewer's store: its next record links to it.
        assert take_checkpoint(reviewer, None).seq == 5
        assert verify_log(reviewer).ok
