"""A data-subject request: every request made about a subject (a caller-supplied subject
tag, recorded as a keyed digest only) is erased together, or held together."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventKind
from gateway import ErasureRefused, Gateway, InputError, Settings
from gateway.cli import main
from gateway.evidence import Auditing, Erasing, HoldScope

SUBJECT = "customer-118204"


def test_erase_by_subject_erases_its_requests_only(
    gw: Gateway, erasing: Erasing, settings: Settings, db_path: Path
) -> None:
    a = gw.complete("compliance_review", "Is clause 4 fine?", subject=SUBJECT)
    b = gw.complete("compliance_review", "And clause 5?", subject=SUBJECT)
    other = gw.complete("compliance_review", "Clause 6?", subject="customer-9")
    plain = gw.complete("compliance_review", "Clause 7?")
    with AuditStore.open(settings.database_url) as store:
        [request] = [e for e in store.events_for_request(a.request_id) if e.kind == "request"]
    tag = request.data["subject"]
    assert tag.startswith("hmac-sha256:") and tag == erasing.subject_tag(SUBJECT)
    with sqlite3.connect(db_path) as db:  # the identifier itself is nowhere in the log
        assert not [r for r in db.execute("SELECT body FROM events") if SUBJECT.encode() in r[0]]

    report = erasing.erase_subject(SUBJECT, reason="DSAR-7", actor="j", approver="dpo")
    assert set(report.erased) == {a.request_id, b.request_id}
    with Auditing.open(settings) as auditing:
        assert auditing.verify().ok
    for kept in (other, plain):
        with AuditStore.open(settings.database_url) as store:
            events = store.events_for_request(kept.request_id)
        assert not [e for e in events if e.kind == EventKind.ERASURE]
    with pytest.raises(InputError, match="no recorded request carries that subject"):
        erasing.erase_subject("nobody", reason="DSAR-8", actor="j", approver="dpo")


def test_a_hold_on_a_subject_refuses_its_erasure(gw: Gateway, erasing: Erasing) -> None:
    gw.complete("compliance_review", "Is clause 4 fine?", subject=SUBJECT)
    hold = erasing.hold(
        HoldScope(subject=erasing.subject_tag(SUBJECT)), reason="Case 3", actor="legal"
    )
    with pytest.raises(ErasureRefused, match=f"legal hold {hold.hold_id}"):
        erasing.erase_subject(SUBJECT, reason="DSAR-9", actor="j", approver="dpo")


def test_the_cli_erases_by_subject(gw: Gateway, erasing: Erasing, settings: Settings) -> None:
    gw.complete("compliance_review", "Is clause 4 fine?", subject=SUBJECT)
    env = {"GATEWAY_DATABASE_URL": settings.database_url}
    args = ["audit", "erase", "--subject", SUBJECT, "--reason", "DSAR-10", "--approver", "dpo"]
    done = CliRunner().invoke(main, [*args, "--actor", "j"], env=env)
    assert done.exit_code == 0, done.output
    assert "erased req_" in done.output and SUBJECT not in done.output
    both = CliRunner().invoke(main, [*args, "--request", "req_x"], env=env)
    assert both.exit_code == 2 and "Traceback" not in both.output


def test_a_subject_that_is_not_a_plain_name_is_refused(gw: Gateway) -> None:
    with pytest.raises(InputError, match="subject"):
        gw.complete("compliance_review", "Is clause 4 fine?", subject="a\x1bb")
