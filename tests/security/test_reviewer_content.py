"""A PostgreSQL reviewer reads content only against an ACCESS record it committed (0015).

Before, `gateway db grant ROLE --read-only` gave SELECT on ``payloads``: the audited commands
recorded an ACCESS event before showing content, but the same role, connected with psql,
selected every prompt and answer and nothing was recorded. Now the role selects the digest
and size only; ``audit_read_content(access_seq, digest)`` returns content against a
committed ACCESS event of the same session user that names the digest. The audited commands
record that event and read through it; verify hashes content on the server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from io import StringIO

import psycopg
import pytest
from click.testing import CliRunner

from audit import AuditStore, EventDraft, EventKind
from audit.errors import ContentNotPermitted
from audit.store.chain import event_body, link_hash
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.store.signing import Signer
from audit.verify import verify_log
from gateway.cli import main
from gateway.evidence import Auditing
from gateway.settings import Settings
from tests.gateway.conftest import MakeGateway
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

RECORD_KEY = "45" * 32
REVIEWER_KEY = "46" * 32  # the reviewer's own records are signed too, with its own key
REVIEWER = "content_reviewer"
QUESTION = "Transaction: pay 4,200 EUR to Initech GmbH, invoice 77"


@dataclass
class Recorded:
    owner_dsn: str
    reviewer_url: str
    reviewer_dsn: str
    app_url: str
    request_id: str
    response_seq: int
    answer_digest: str


@pytest.fixture
def recorded(make_gateway: MakeGateway, postgres_server: PostgresServer) -> Iterator[Recorded]:
    """One answered request on PostgreSQL, and a reviewer granted as `db grant --read-only`."""
    db = postgres_server.create_database()
    owner_url = postgres_server.url(db)
    upgrade(owner_url)
    _reviewer_role(postgres_server)
    grant(owner_url, REVIEWER, read_only=True)
    result = make_gateway(database_url=owner_url, record_key=RECORD_KEY).complete(
        "compliance_review", QUESTION, caller="desk"
    )
    with AuditStore.open(owner_url) as store:
        (response,) = store.iter_events(kind=EventKind.RESPONSE, request_ids=[result.request_id])
    yield Recorded(
        owner_dsn=postgres_server.dsn(db),
        reviewer_url=postgres_server.url(db, REVIEWER),
        reviewer_dsn=postgres_server.dsn(db, REVIEWER),
        app_url=owner_url,
        request_id=result.request_id,
        response_seq=response.seq,
        answer_digest=response.payload_digests["response_body"],
    )


def _reviewer_role(postgres_server: PostgresServer) -> None:
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (REVIEWER,))
        if exists.fetchone() is None:
            conn.execute(f"CREATE ROLE {REVIEWER} LOGIN")


def _reviewer_settings(recorded: Recorded) -> Settings:
    public = Signer.from_text(RECORD_KEY).public_key
    return Settings(
        database_url=recorded.reviewer_url, record_key=REVIEWER_KEY, trusted_keys=(public,)
    )


def _read(recorded: Recorded, access_seq: int, ref: str) -> bytes:
    with psycopg.connect(recorded.reviewer_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT audit_read_content(%s, %s)", (access_seq, ref)).fetchone()
    assert row is not None
    return bytes(row[0])


def _access(url: str, data: dict[str, object]) -> int:
    with AuditStore.open(url, create=False) as store:
        return store.append(
            EventDraft(kind=EventKind.ACCESS, request_id="access-test", caller="x", data=data)
        ).seq


def test_a_reviewer_cannot_select_content_but_still_reads_metadata(recorded: Recorded) -> None:
    with psycopg.connect(recorded.reviewer_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT content FROM payloads").fetchall()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM payloads").fetchall()
        digests = {r[0] for r in conn.execute("SELECT digest, size FROM payloads").fetchall()}
        assert recorded.answer_digest in digests
        kinds = {r[0] for r in conn.execute("SELECT kind FROM events").fetchall()}
        assert {"request", "response"} <= kinds
    with AuditStore.open(recorded.reviewer_url, create=False) as store:
        assert not store.reads_content_directly
        with pytest.raises(ContentNotPermitted, match="only through an audited command"):
            store.payload(recorded.answer_digest)


def test_the_function_refuses_without_a_committed_access_record_of_ones_own(
    recorded: Recorded,
) -> None:
    ref = recorded.answer_digest
    refused = psycopg.errors.InsufficientPrivilege
    with pytest.raises(refused, match="no ACCESS record of yours"):
        _read(recorded, recorded.response_seq, ref)  # not an ACCESS event
    theirs = _access(recorded.app_url, {"payloads": {"response_body": ref}})
    with pytest.raises(refused, match="no ACCESS record of yours"):
        _read(recorded, theirs, ref)  # the application role's record, not the reviewer's
    other = _access(recorded.reviewer_url, {"payloads": {}})
    with pytest.raises(refused, match="does not name"):
        _read(recorded, other, ref)  # the reviewer's record, naming other content
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        _read(recorded, other, "sha256")  # a fragment of a digest names nothing
    # The digest put where the reviewer chooses the text (its name, an export's filters), not
    # among the payloads its record says it read: still no content.
    planted = _access(
        recorded.reviewer_url,
        {"reviewer": ref, "export": {"filters": {"task": ref}}, "payloads": {}},
    )
    with pytest.raises(refused, match="does not name"):
        _read(recorded, planted, ref)
    own = _access(recorded.reviewer_url, {"payloads": {"response_body": ref}})
    assert b"content" in _read(recorded, own, ref)
    # The window closes: the owner may shorten it; an old record reads nothing.
    with psycopg.connect(recorded.owner_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION audit_content_window() RETURNS interval "
            "LANGUAGE sql IMMUTABLE AS $$ SELECT interval '0 seconds' $$"
        )
    with pytest.raises(refused, match="expired"):
        _read(recorded, own, ref)


def test_the_audited_show_reads_through_the_function_and_leaves_its_access_record(
    recorded: Recorded,
) -> None:
    result = CliRunner().invoke(
        main,
        ["audit", "show", recorded.request_id, "--content", "--reviewer", "j.smith"],
        env={
            "GATEWAY_DATABASE_URL": recorded.reviewer_url,
            "GATEWAY_RECORD_KEY": REVIEWER_KEY,
            "GATEWAY_TRUSTED_KEYS": Signer.from_text(RECORD_KEY).public_key,
        },
    )
    assert result.exit_code == 0, result.output
    assert "Initech" in result.output and "this read is recorded as seq" in result.output
    with AuditStore.open(recorded.app_url) as store:
        (access,) = store.iter_events(kind=EventKind.ACCESS)
    assert access.caller == "j.smith" and access.data["read_request_id"] == recorded.request_id
    assert access.data["payloads"]["response_body"] == recorded.answer_digest
    with psycopg.connect(recorded.owner_dsn, autocommit=True) as conn:
        readers = conn.execute("SELECT access_seq, reader FROM content_readers").fetchall()
    assert readers == [(access.seq, REVIEWER)]
    with Auditing.open(_reviewer_settings(recorded)) as auditing:
        assert [e.seq for e in auditing.reads_of(recorded.request_id)] == [access.seq]


def test_a_content_export_as_the_reviewer_records_each_read(recorded: Recorded) -> None:
    out = StringIO()
    with Auditing.open(_reviewer_settings(recorded)) as auditing:
        auditing.export(out, reviewer="j.smith", with_content=True)
        reads = auditing.reads_of(recorded.request_id)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    (request,) = [r for r in records if r.get("kind") == "request"]
    assert "Initech" in json.dumps(request["content"]["messages"])
    assert "refused" not in request["content"]
    with AuditStore.open(recorded.app_url) as store:
        accesses = list(store.iter_events(kind=EventKind.ACCESS))
    selection, item = accesses
    assert "export" in selection.data and item.data["export_access_seq"] == selection.seq
    assert item.data["read_request_id"] == recorded.request_id
    assert [e.seq for e in reads] == [selection.seq]  # the export is listed once


def test_verify_as_the_reviewer_checks_content_without_reading_it(recorded: Recorded) -> None:
    with AuditStore.open(recorded.reviewer_url, create=False) as store:
        assert verify_log(store).ok
    with psycopg.connect(recorded.owner_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE payloads DISABLE TRIGGER USER")
        conn.execute(
            "UPDATE payloads SET content = 'forged'::bytea WHERE digest = %s",
            (recorded.answer_digest,),
        )
    with AuditStore.open(recorded.reviewer_url, create=False) as store:
        report = verify_log(store)
    assert not report.ok
    assert any(recorded.answer_digest in str(d) or "content" in str(d) for d in report.defects)


def test_replay_as_the_reviewer_is_one_line_and_reads_nothing(recorded: Recorded) -> None:
    """`replay` records REPLAY events, which only the application role appends: run as the
    reviewer it stops with one line, having read no content and recorded nothing."""
    result = CliRunner().invoke(
        main,
        ["replay", recorded.request_id, "--live", "--operator", "j.smith"],
        env={
            "GATEWAY_DATABASE_URL": recorded.reviewer_url,
            "GATEWAY_RECORD_KEY": REVIEWER_KEY,
            "GATEWAY_TRUSTED_KEYS": Signer.from_text(RECORD_KEY).public_key,
        },
    )
    assert result.exit_code == 4, result.output  # an audit error
    assert "only through an audited command" in result.output
    assert result.output.count("\n") <= 2 and "Traceback" not in result.output
    with psycopg.connect(recorded.owner_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM content_readers").fetchone() == (0,)


def test_format_2_the_reviewer_reads_against_its_own_committed_record(
    make_gateway: MakeGateway, postgres_server: PostgresServer
) -> None:
    """On log format 2 the reviewer inserts its ACCESS event itself (no procedure): the
    same rule holds, and the audited read works."""
    db = postgres_server.create_database()
    owner_url = postgres_server.url(db)
    upgrade(owner_url)
    _reviewer_role(postgres_server)
    grant(owner_url, REVIEWER, read_only=True)
    gateway = make_gateway(database_url=owner_url, record_key=RECORD_KEY, audit_format=2)
    request_id = gateway.complete("compliance_review", QUESTION, caller="desk").request_id
    public = Signer.from_text(RECORD_KEY).public_key
    reviewer = Settings(
        database_url=postgres_server.url(db, REVIEWER),
        record_key=REVIEWER_KEY,
        trusted_keys=(public,),
    )
    with Auditing.open(reviewer) as auditing:
        content = auditing.read_content(request_id, reviewer="j.smith")
    assert "Initech" in json.dumps(content.messages) and content.access_seq is not None
    with (
        psycopg.connect(postgres_server.dsn(db, REVIEWER), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT content FROM payloads").fetchall()
    with psycopg.connect(postgres_server.dsn(db), autocommit=True) as conn:
        readers = conn.execute("SELECT access_seq, reader FROM content_readers").fetchall()
    assert readers == [(content.access_seq, REVIEWER)]


def test_an_access_record_of_the_calling_transaction_reads_nothing(
    recorded: Recorded,
) -> None:
    """A record the same transaction could still roll back is no record: refused inside it
    (here the owner's session, which may insert a well-linked row by hand), and gone with
    its rollback. A committed one of the reviewer's own reads (the tests above)."""
    ref = recorded.answer_digest
    with psycopg.connect(recorded.owner_dsn) as conn:  # one transaction until commit()
        seq, head = conn.execute(
            "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
        ).fetchone()  # type: ignore[misc]
        when = datetime.now(UTC)
        body = event_body(
            seq=seq + 1, event_id="e-own", request_id="access-own", kind="access",
            recorded_at=when, task=None, caller="owner", policy_fingerprint=None,
            request_hash=None, durability="fsync", data={"payloads": {"response_body": ref}},
            payloads={}, policy_ref=None,
        )  # fmt: skip
        conn.execute(
            "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, caller, body, "
            "prev_hash, hash) VALUES (%s, 'e-own', 'access-own', 'access', %s, 'owner', %s, "
            "%s, %s)",
            (seq + 1, when, body, head, link_hash(head, body)),
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not committed"):
            conn.execute("SELECT audit_read_content(%s, %s)", (seq + 1, ref))
        conn.rollback()  # the refusal aborted the transaction: the record goes with it
        assert conn.execute("SELECT count(*) FROM content_readers").fetchone() == (0,)
