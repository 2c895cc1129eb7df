"""Retention expiry: `purge` erases expired content provably; verify tells erased from tampered.

The tamper matrix on every log format is tests/retention/test_erasure_formats.py; these are
the SQLite-only rows and the readers of erased content (cache, show, export, replay)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventDraft, EventKind
from gateway import ErasureRefused, Gateway, IntegrityAlert, Settings
from gateway.cli import main
from gateway.evidence import Auditing, Erasing, HoldScope
from gateway.keys import record_signer
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway
from tests.retention.conftest import LATER

PROMPT = "Transaction: pay 250 GBP to Example Ltd"


def payload_rows(db_path: Path) -> int:
    with sqlite3.connect(db_path) as db:
        return int(db.execute("SELECT count(*) FROM payloads").fetchone()[0])


def test_the_database_refuses_deleting_content_without_an_erasure_event(
    gw: Gateway, db_path: Path
) -> None:
    gw.complete("compliance_review", PROMPT)
    with sqlite3.connect(db_path) as db, pytest.raises(sqlite3.DatabaseError, match="erasure"):
        db.execute("DELETE FROM payloads")


def test_purge_is_idempotent(gw: Gateway, erasing: Erasing) -> None:
    gw.complete("compliance_review", PROMPT)
    gw.complete("compliance_review", PROMPT + " and 10 GBP to Other Ltd")
    first = erasing.purge(actor="ops", now=LATER)
    again = erasing.purge(actor="ops", now=LATER)
    assert first.requests_erased == 2
    assert (again.requests_erased, again.payloads_removed, again.resumed_events) == (0, 0, 0)


def test_held_content_is_not_purged_until_released(gw: Gateway, erasing: Erasing) -> None:
    held = gw.complete("compliance_review", PROMPT)
    hold = erasing.hold(HoldScope(task="compliance_review"), reason="Case 12-cv-881", actor="legal")
    report = erasing.purge(actor="ops", now=LATER)
    assert report.requests_erased == 0
    [row] = [r for r in report.rows if r.task == "compliance_review"]
    assert row.held == 1 and hold.hold_id in row.reasons[0]

    with pytest.raises(ErasureRefused, match=f"legal hold {hold.hold_id}"):
        erasing.erase(
            [held.request_id], rule="subject_request", reason="DSAR", actor="j", approver="dpo"
        )

    erasing.release(hold.hold_id, reason="case closed", actor="legal")
    assert erasing.purge(actor="ops", now=LATER).requests_erased == 1


def test_the_same_body_of_a_request_still_kept_is_not_removed(
    gw: Gateway, erasing: Erasing, settings: Settings
) -> None:
    a = gw.complete("compliance_review", PROMPT, caller="desk-a")
    b = gw.complete("compliance_review", PROMPT, caller="desk-b")  # same body, other caller
    hold = erasing.hold(HoldScope(caller="desk-b"), reason="review", actor="legal")
    report = erasing.purge(actor="ops", now=LATER)
    # Sealed payloads (audit.sealing) are one row per event, never shared: the held
    # request's identical body is its own row, so nothing of a's had to be kept for it.
    assert report.requests_erased == 1 and report.payloads_kept == 0
    with Auditing.open(settings) as auditing:
        verified = auditing.verify()
        content = auditing.read_content(b.request_id, reviewer="j.smith")
    assert verified.ok, verified.defects
    assert content.messages and hold.hold_id and a.request_id


def test_the_replay_cache_never_serves_an_erased_answer(
    make_gateway: MakeGateway, erasing: Erasing, fake_api: FakeMessagesAPI
) -> None:
    gw = make_gateway()
    first = gw.complete("compliance_review", PROMPT)
    assert gw.complete("compliance_review", PROMPT).cached  # now in this gateway's memo
    erasing.erase(
        [first.request_id], rule="subject_request", reason="DSAR-1", actor="j", approver="dpo"
    )
    fake_api.script(Reply.ok(text="answered again"), Reply.ok(text="answered again"))
    again = gw.complete("compliance_review", PROMPT)  # the memo is asked of the log first
    fresh = make_gateway().complete("compliance_review", PROMPT + " ")  # a new instance
    assert not again.cached and again.text == "answered again"
    assert not fresh.cached
    assert len(fake_api.requests) == 3


def test_a_forged_erasure_does_not_decide_what_is_served(
    make_gateway: MakeGateway, settings: Settings, fake_api: FakeMessagesAPI
) -> None:
    first = make_gateway().complete("compliance_review", PROMPT)
    # An erasure event written by someone without the record key (an unsigned one).
    with AuditStore.open(settings.database_url) as store:
        store.append(
            EventDraft(kind=EventKind.ERASURE, request_id=first.request_id, data={"erased": []})
        )
    with pytest.raises(IntegrityAlert, match="erasure event"):
        make_gateway().complete("compliance_review", PROMPT)
    assert len(fake_api.requests) == 1


def test_audit_show_content_says_erased_on_date_by_event(
    gw: Gateway, erasing: Erasing, settings: Settings, db_path: Path
) -> None:
    first = gw.complete("compliance_review", PROMPT)
    hit = gw.complete("compliance_review", PROMPT)
    report = erasing.erase(
        [first.request_id], rule="subject_request", reason="DSAR-7", actor="j", approver="dpo"
    )
    seq = report.erased[first.request_id]
    env = {
        "GATEWAY_DATABASE_URL": settings.database_url,
        "GATEWAY_POLICY_DIR": str(settings.policy_dir),
    }
    for request_id in (first.request_id, hit.request_id):  # a cache hit shows what it served
        result = CliRunner().invoke(
            main, ["audit", "show", request_id, "--content", "--reviewer", "r"], env=env
        )
        assert result.exit_code == 0, result.output
        today = datetime.now(UTC).date().isoformat()
        assert f"erased on {today} by event seq {seq} (subject_request: DSAR-7" in result.output
    verified = CliRunner().invoke(main, ["audit", "verify"], env=env)
    assert verified.exit_code == 0, verified.output
    assert f"{first.request_id}: erased by policy (event seq {seq})" in verified.output


def test_a_content_export_of_erased_requests_verifies_offline(
    gw: Gateway, erasing: Erasing, settings: Settings, tmp_path: Path
) -> None:
    first = gw.complete("compliance_review", PROMPT)
    gw.complete("compliance_review", PROMPT)  # a cache hit of the answer that goes
    gw.complete("quant_strategy", "FX momentum")
    erasing.purge(actor="ops", now=LATER)
    env = {"GATEWAY_DATABASE_URL": settings.database_url}
    out = tmp_path / "export.jsonl"
    public = tmp_path / "record.pub"
    runner = CliRunner()
    exported = runner.invoke(
        main,
        [
            "audit",
            "export",
            "--format",
            "jsonl",
            "--with-content",
            "--reviewer",
            "r",
            "-o",
            str(out),
        ],
        env=env,
    )
    assert exported.exit_code == 0, exported.output
    public.write_text(record_signer(settings, create=False).public_key + "\n")  # type: ignore[union-attr]
    lines = out.read_text().splitlines()
    assert sum('"erased"' in line and first.request_id in line for line in lines) >= 1
    checked = runner.invoke(
        main, ["audit", "verify", "--export", str(out), "--public-key", str(public)], env=env
    )
    assert checked.exit_code == 0, checked.output


def test_after_a_purge_the_prompt_is_nowhere_in_the_database_files(
    gw: Gateway, erasing: Erasing, db_path: Path
) -> None:
    secret = "Transfer 9,999 GBP for client Zebulon Quartermaine"
    gw.complete("compliance_review", secret)
    assert any(secret.encode() in p.read_bytes() for p in db_path.parent.glob("audit.db*"))
    erasing.purge(actor="ops", now=LATER)
    leftovers = [
        p.name for p in db_path.parent.glob("audit.db*") if secret.encode() in p.read_bytes()
    ]
    assert leftovers == []


def test_replay_verify_counts_erased_requests_apart_from_failures(
    gw: Gateway, erasing: Erasing, settings: Settings
) -> None:
    gw.complete("compliance_review", PROMPT)
    gw.complete("quant_strategy", "FX momentum")
    erasing.purge(actor="ops", now=LATER)
    env = {
        "GATEWAY_DATABASE_URL": settings.database_url,
        "GATEWAY_POLICY_DIR": str(settings.policy_dir),
    }
    result = CliRunner().invoke(main, ["replay", "--verify", "--all", "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{") :])["summary"]
    assert summary["counts"]["erased"] == 1 and summary["counts"].get("failed", 0) == 0
