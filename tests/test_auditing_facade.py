"""`gateway.evidence`: the audit log through the library, with only the gateway's errors.

Every failure below starts as an ``audit`` exception; none may leave the facade as one.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import audit
from audit import AuditStore, EventDraft, EventKind
from gateway import (
    AuditError,
    AuditUnavailable,
    AuditWriteError,
    ConfigurationError,
    GatewayError,
    InputError,
    Settings,
)
from gateway._store_adapter import audit_failure
from gateway.evidence import (
    Auditing,
    EventFilter,
    checkpoint_text,
    grant_role,
    schema_status,
    upgrade_schema,
)
from gateway.keys import record_signer

KEY = "11" * 32
OTHER_KEY = "22" * 32


def settings(url: str, key: str | None = KEY) -> Settings:
    return Settings(database_url=url, checkpoint_key=key)


@pytest.fixture
def url(sqlite_url: str) -> str:
    signer = record_signer(settings(sqlite_url), create=True)  # signed as the gateway signs
    with AuditStore.open(sqlite_url, signer=signer) as store:
        for rid, task in [("r-1", "pricing"), ("r-2", "compliance_review")]:
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=rid, task=task))
            store.append(EventDraft(kind=EventKind.RESPONSE, request_id=rid, task=task))
    return sqlite_url


def assert_translated(error: GatewayError) -> None:
    assert not isinstance(error, audit.AuditStoreError)
    assert isinstance(error.__cause__, audit.AuditStoreError)  # raise ... from exc


def test_a_file_that_is_not_a_database_is_audit_unavailable(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"junk" * 1000)
    with pytest.raises(AuditUnavailable, match="cannot open the audit database") as caught:
        Auditing.open(settings(f"sqlite:///{junk}"))
    assert_translated(caught.value)


def test_lists_requests_and_shows_one(url: str) -> None:
    with Auditing.open(settings(url)) as auditing:
        every = auditing.requests()
        pricing = auditing.requests(EventFilter(task="pricing"))
        events = auditing.request_events("r-2")
    assert [r.request_id for r in every] == ["r-1", "r-2"]
    assert [r.status for r in every] == ["completed", "completed"]
    assert [r.request_id for r in pricing] == ["r-1"]
    assert [e.kind for e in events] == [EventKind.REQUEST, EventKind.RESPONSE]


def test_a_missing_request_id_is_input_error(url: str) -> None:
    with Auditing.open(settings(url)) as auditing, pytest.raises(InputError, match="'nope'"):
        auditing.request_events("nope")


def test_checkpoint_round_trip_and_export_naming_the_reviewer(url: str, tmp_path: Path) -> None:
    head_file = tmp_path / "head.json"
    with Auditing.open(settings(url)) as auditing:
        head = auditing.checkpoint()
        head_file.write_text(checkpoint_text(head), encoding="utf-8")
        report = auditing.verify(checkpoint=head_file)
        out = io.StringIO()
        summary = auditing.export(out, "jsonl", reviewer="a.auditor")
    assert head.signature is not None
    assert report.ok and report.checkpoint_seq == head.seq
    assert summary.events == head.seq and summary.export_seq == head.seq + 1
    assert [json.loads(line)["seq"] for line in out.getvalue().splitlines()] == list(
        range(1, head.seq + 1)
    )
    with AuditStore.open(url) as store:
        assert store.event(summary.export_seq).caller == "a.auditor"


def test_verify_reports_progress(url: str) -> None:
    seen: list[tuple[int, int]] = []
    with Auditing.open(settings(url)) as auditing:
        auditing.verify(progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (4, 4)


def test_a_checkpoint_signed_with_another_key_is_input_error(url: str, tmp_path: Path) -> None:
    head_file = tmp_path / "head.json"
    with Auditing.open(settings(url)) as auditing:
        head_file.write_text(checkpoint_text(auditing.checkpoint()), encoding="utf-8")
    with Auditing.open(settings(url, key=OTHER_KEY)) as auditing:
        with pytest.raises(InputError, match="another key") as caught:
            auditing.verify(checkpoint=head_file)
        assert_translated(caught.value)


def test_a_checkpoint_of_another_database_is_input_error(url: str, tmp_path: Path) -> None:
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    AuditStore.open(other_url).close()  # a checkpoint is of an existing log: it creates none
    head_file = tmp_path / "head.json"
    with Auditing.open(settings(other_url)) as auditing:
        head_file.write_text(checkpoint_text(auditing.checkpoint()), encoding="utf-8")
    with Auditing.open(settings(url)) as auditing:
        with pytest.raises(InputError, match="not this one") as caught:
            auditing.verify(checkpoint=head_file)
        assert_translated(caught.value)


@pytest.mark.parametrize("content", [b"{}", b"not json", b"\xff\xfe"])
def test_an_unreadable_checkpoint_file_is_input_error(
    url: str, tmp_path: Path, content: bytes
) -> None:
    head_file = tmp_path / "head.json"
    head_file.write_bytes(content)
    with Auditing.open(settings(url)) as auditing, pytest.raises(InputError):
        auditing.verify(checkpoint=head_file)


def test_checkpoint_without_a_usable_key_is_a_configuration_error(url: str) -> None:
    with Auditing.open(settings(url, key=None)) as auditing:
        with pytest.raises(ConfigurationError, match="no checkpoint signing key"):
            auditing.checkpoint()
        assert auditing.checkpoint(unsigned=True).signature is None
    with Auditing.open(settings(url, key="secret")) as auditing:
        with pytest.raises(ConfigurationError, match="not usable") as caught:
            auditing.checkpoint()
        assert_translated(caught.value)


def test_schema_functions_upgrade_report_and_refuse_grants_on_sqlite(tmp_path: Path) -> None:
    fresh = settings(f"sqlite:///{tmp_path / 'new.db'}")
    before = schema_status(fresh)
    assert before.current is None and not before.up_to_date
    assert upgrade_schema(fresh) == before.head
    assert schema_status(fresh).up_to_date
    with pytest.raises(AuditUnavailable, match="only on PostgreSQL") as caught:
        grant_role(fresh, "reviewer", read_only=True)
    assert_translated(caught.value)


def test_schema_functions_on_a_junk_file_are_audit_unavailable(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"junk" * 1000)
    for call in (upgrade_schema, schema_status):
        with pytest.raises(AuditUnavailable) as caught:
            call(settings(f"sqlite:///{junk}"))
        assert_translated(caught.value)


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        (audit.NotFound("no such seq."), InputError),
        (audit.CheckpointError("bad file."), InputError),
        (audit.DatabaseUnavailable("cannot open."), AuditUnavailable),
        (audit.SchemaMismatch("behind."), AuditUnavailable),
        (audit.AppendFailed("not committed."), AuditWriteError),
        (audit.InvalidEvent("not canonical."), AuditWriteError),
        (audit.ContentMismatch("sha256:aa", "sha256:bb"), AuditError),
    ],
)
def test_every_audit_store_error_has_a_gateway_error(
    theirs: audit.AuditStoreError, ours: type[GatewayError]
) -> None:
    translated = audit_failure(theirs)
    assert type(translated) is ours
    assert str(translated) == str(theirs)  # the message and the advice survive


def test_every_audit_store_error_class_is_covered() -> None:
    classes = [
        value
        for value in vars(audit).values()
        if isinstance(value, type) and issubclass(value, audit.AuditStoreError)
    ]
    for cls in classes:
        error = cls("sha256:aa", "sha256:bb") if cls is audit.ContentMismatch else cls("x")
        assert isinstance(audit_failure(error), GatewayError)


def test_the_evidence_facades_exports_are_pinned() -> None:
    import gateway.evidence

    assert sorted(gateway.evidence.__all__) == [
        "ApprovalRecord",
        "ApprovalStatus",
        "Auditing",
        "CheckpointEras",
        "CheckpointKeyInfo",
        "CheckpointRotation",
        "ConsistencyReport",
        "Erased",
        "Erasing",
        "ErasureReport",
        "EventFilter",
        "EventKind",
        "ExportVerifyReport",
        "GroupBy",
        "Hold",
        "HoldScope",
        "KeyListing",
        "KeyRotation",
        "LISTED_STATUSES",
        "PolicyRecords",
        "PolicyVersion",
        "PurgeReport",
        "PurgeRow",
        "ReceiptReport",
        "RecordKeyInfo",
        "RecordedContent",
        "RecordedPack",
        "RequestSummary",
        "SignoffHistory",
        "Step",
        "StoredEvent",
        "TimeStampCheck",
        "UsageReport",
        "UsageRow",
        "VerifyReport",
        "WitnessCheck",
        "WitnessOutcome",
        "answer_cost",
        "approval_draft",
        "approval_status",
        "check_approvals",
        "check_consistency",
        "check_receipt",
        "checkpoint_text",
        "fingerprint_prefix",
        "grant_role",
        "integrate",
        "key_listing",
        "note_verifier_key",
        "pinned_for_start",
        "prove",
        "receipt_text",
        "record_pack",
        "record_refused_tasks",
        "rotate_checkpoint_key",
        "rotate_record_key",
        "schema_status",
        "sign_approval",
        "signoff_sheet",
        "timestamp",
        "tree_checkpoint_text",
        "tree_head",
        "trusted_approvers",
        "upgrade_schema",
        "verify_export",
        "wanted",
        "withhold_unapproved",
        "witness",
    ]
    for name in gateway.evidence.__all__:
        assert hasattr(gateway.evidence, name), name
