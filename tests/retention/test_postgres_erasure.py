"""PostgreSQL: only the eraser role may remove content, and only under its own erasure events;
the application and reviewer roles can neither remove content nor forge an erasure. The
gateways here key their request hashes and subject tags under a cache key, as a deployment
with ``GATEWAY_CACHE_KEY_FILE`` does."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from audit import AppendFailed, AuditStore, EventDraft, EventKind
from audit.store.erasure import erase_content
from audit.store.migrate import upgrade
from audit.store.roles import grant
from gateway import ConfigurationError, ErasureRefused, Gateway, Settings
from gateway.evidence import Auditing, Erasing, HoldScope
from gateway.keys import CACHE_KEY_FILE
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway
from tests.retention.conftest import LATER
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

PROMPT = "Transaction: pay 42 CHF to Example AG"
RECORD_KEY = "44" * 32
CACHE_KEY = "55" * 32
SUBJECT = "customer-4711"


def _role(server: PostgresServer, role: str) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {role} LOGIN")


@pytest.fixture
def roles(postgres_server: PostgresServer, pg_url: str) -> dict[str, str]:
    upgrade(pg_url)
    db = pg_url.rsplit("/", 1)[1]
    urls = {}
    for role, how in (
        ("gateway_app", {}),
        ("gateway_eraser", {"eraser": True}),
        ("gateway_reviewer", {"read_only": True}),
    ):
        _role(postgres_server, role)
        grant(pg_url, role, **how)
        urls[role] = postgres_server.url(db, role)
    return urls


def _settings(url: str, settings: Settings, **changes: object) -> Settings:
    values = {"database_url": url, "record_key": RECORD_KEY, "cache_key": CACHE_KEY, **changes}
    return Settings(**{**settings.model_dump(), **values})


def _app(make_gateway: MakeGateway, roles: dict[str, str], **changes: object) -> Gateway:
    values = {"record_key": RECORD_KEY, "cache_key": CACHE_KEY, **changes}
    return make_gateway(database_url=roles["gateway_app"], **values)


@pytest.mark.parametrize("log_format", [1, 2])
def test_only_the_eraser_removes_content_and_verify_says_erased(
    make_gateway: MakeGateway,
    roles: dict[str, str],
    settings: Settings,
    pg_url: str,
    log_format: int,
) -> None:
    app = _app(make_gateway, roles, audit_format=log_format)
    first = app.complete("compliance_review", PROMPT, subject=SUBJECT)
    app.complete("compliance_review", PROMPT, subject=SUBJECT)  # a cache hit
    held = app.complete("compliance_review", PROMPT + " twice", caller="desk-b", subject=SUBJECT)
    # More than the 16 seqs the eraser may reserve at once on format 2 (migration 0011).
    more = [app.complete("compliance_review", f"{PROMPT} #{n}").request_id for n in range(17)]
    with AuditStore.open(roles["gateway_reviewer"]) as store:
        [request] = [e for e in store.events_for_request(first.request_id) if e.kind == "request"]
    assert request.request_hash is not None and request.request_hash.startswith("hmac-sha256:")
    assert str(request.data["subject"]).startswith("hmac-sha256:")

    with Erasing.open(_settings(roles["gateway_eraser"], settings)) as erasing:
        erasing.hold(HoldScope(caller="desk-b"), reason="Case 7", actor="legal")
        with pytest.raises(ErasureRefused, match="legal hold"):
            erasing.erase(
                [held.request_id], rule="subject_request", reason="D", actor="j", approver="d"
            )
        report = erasing.purge(actor="ops", now=LATER)
    assert report.requests_erased == 18 and report.payloads_removed >= 2 * 18

    with Auditing.open(_settings(roles["gateway_reviewer"], settings)) as auditing:
        verified = auditing.verify()
    assert verified.ok, verified.defects
    assert (verified.sequenced_from is not None) == (log_format == 2)
    assert [n.request_id for n in verified.erasures] == [first.request_id, *more][:20]


def test_the_app_and_reviewer_roles_cannot_remove_content_or_forge_an_erasure(
    make_gateway: MakeGateway, roles: dict[str, str], postgres_server: PostgresServer, pg_url: str
) -> None:
    first = _app(make_gateway, roles).complete("compliance_review", PROMPT, subject=SUBJECT)
    db = pg_url.rsplit("/", 1)[1]
    for role in ("gateway_app", "gateway_reviewer"):
        with psycopg.connect(postgres_server.dsn(db, role), autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("DELETE FROM payloads")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("INSERT INTO erased_content VALUES ('sha256:x', 1)")
        # The app role meets row security; the reviewer records only through the procedure
        # (0013), whose kind check refuses an erasure from a role without DELETE on payloads.
        refusal = "row-level" if role == "gateway_app" else "a reviewer records"
        with AuditStore.open(roles[role]) as store, pytest.raises(AppendFailed, match=refusal):
            store.append(
                EventDraft(kind=EventKind.ERASURE, request_id=first.request_id, data={"erased": []})
            )


def test_even_the_eraser_cannot_remove_content_no_erasure_event_names(
    make_gateway: MakeGateway, roles: dict[str, str], postgres_server: PostgresServer, pg_url: str
) -> None:
    first = _app(make_gateway, roles).complete("compliance_review", PROMPT, subject=SUBJECT)
    with AuditStore.open(roles["gateway_eraser"]) as store:
        [request] = [e for e in store.events_for_request(first.request_id) if e.kind == "request"]
        digest = request.payload_digests["request_body"]
        with pytest.raises(AppendFailed, match="could not be removed"):
            erase_content(store, [(request.seq, [digest])])  # a REQUEST is no erasure
    db = pg_url.rsplit("/", 1)[1]
    dsn = postgres_server.dsn(db, "gateway_eraser")
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="erasure"),
    ):
        conn.execute("DELETE FROM payloads")


def test_replay_on_postgres_never_serves_an_erased_answer(
    make_gateway: MakeGateway, roles: dict[str, str], settings: Settings, fake_api: FakeMessagesAPI
) -> None:
    app = _app(make_gateway, roles)
    first = app.complete("compliance_review", PROMPT, subject=SUBJECT)
    with Erasing.open(_settings(roles["gateway_eraser"], settings)) as erasing:
        erasing.erase([first.request_id], rule="other", reason="test", actor="j", approver="d")
    fake_api.script(Reply.ok(text="again"))
    again = app.complete("compliance_review", PROMPT)
    assert not again.cached and again.text == "again"


def test_erase_by_subject_on_postgres_finds_both_cache_key_eras(
    make_gateway: MakeGateway, roles: dict[str, str], settings: Settings, tmp_path: Path
) -> None:
    before = _app(make_gateway, roles).complete("compliance_review", PROMPT, subject=SUBJECT)
    ring = tmp_path / "previous-cache.keys"
    ring.write_text(CACHE_KEY + "\n", encoding="ascii")
    rotated = {"cache_key": "66" * 32, "previous_cache_keys_file": ring}
    after = _app(make_gateway, roles, **rotated).complete(
        "compliance_review", PROMPT + " again", subject=SUBJECT
    )
    with Erasing.open(_settings(roles["gateway_eraser"], settings, **rotated)) as erasing:
        held = erasing.hold(
            HoldScope(
                subject=erasing.subject_tags(SUBJECT)[0],
                subject_tags=tuple(erasing.subject_tags(SUBJECT)[1:]),
            ),
            reason="Case 8",
            actor="legal",
        )
        with pytest.raises(ErasureRefused, match=held.hold_id):
            erasing.erase([before.request_id], rule="other", reason="r", actor="j", approver="d")
        erasing.release(held.hold_id, reason="closed", actor="legal")
        report = erasing.erase_subject(SUBJECT, reason="DSAR-13", actor="j", approver="dpo")
    assert set(report.erased) == {before.request_id, after.request_id}
    with Auditing.open(_settings(roles["gateway_reviewer"], settings)) as auditing:
        verified = auditing.verify()
    assert verified.ok, verified.defects


def test_a_lost_cache_key_file_beside_the_record_key_is_an_error_on_postgres(
    make_gateway: MakeGateway, roles: dict[str, str], tmp_path: Path
) -> None:
    record_key = tmp_path / "record.key"
    record_key.write_text(RECORD_KEY, encoding="ascii")
    make_gateway(database_url=roles["gateway_app"], record_key_file=record_key).complete(
        "compliance_review", PROMPT, subject=SUBJECT
    )
    (tmp_path / CACHE_KEY_FILE).unlink()  # made beside the record key by the first gateway
    with pytest.raises(ConfigurationError, match="is missing, and this audit log holds"):
        make_gateway(database_url=roles["gateway_app"], record_key_file=record_key).complete(
            "compliance_review", PROMPT
        )
