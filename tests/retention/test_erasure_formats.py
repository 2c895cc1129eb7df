"""The erasure tamper matrix on every log format: SQLite, PostgreSQL format 1 and format 2.

Content removed under an erasure event is reported erased by policy (verify exit 0);
content removed without one, or under an ``erased_content`` row no erasure event names, is
tampering; a run stopped between its events and the removal is completed by the next; held
content is never erased; a forged erasure decides nothing. On format 2 the erasure events
are sequenced rows like any other, linked by the integrator (or still pending), and the
format-2 walk reads the content they removed as the format-1 walk does. A live replay's
copies of a request go with it on every format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventDraft, EventKind
from audit.store.migrate import upgrade
from audit.store.models import VerifyReport
from gateway import ErasureRefused, Gateway, IntegrityAlert, Settings
from gateway.cli import main
from gateway.evidence import Auditing, Erasing, HoldScope
from gateway.keys import record_signer
from tests.audit.conftest import Raw
from tests.audit.test_sequenced_security import INTEGRATOR, integrate
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import MakeGateway
from tests.retention.conftest import LATER
from tests.retention.test_replay_copies import replay_live

PROMPT = "Transaction: pay 250 GBP to Example Ltd"
RECORD_KEY = "45" * 32
CACHE_KEY = "46" * 32

FORMATS = [
    "sqlite",
    pytest.param("postgres-1", marks=pytest.mark.postgres),
    pytest.param("postgres-2", marks=pytest.mark.postgres),
]


@dataclass
class Log:
    """One audit log under test: its settings, gateways on it, and the attacker's hand."""

    name: str
    settings: Settings
    gateway: Callable[[], Gateway]
    raw: Raw

    @property
    def sequenced(self) -> bool:
        return self.name == "postgres-2"

    def integrate(self) -> None:
        if self.sequenced:
            integrate(self.settings.database_url)

    def verify(self) -> VerifyReport:
        with Auditing.open(self.settings) as auditing:
            return auditing.verify()

    def env(self) -> dict[str, str]:
        env = {
            "GATEWAY_DATABASE_URL": self.settings.database_url,
            "GATEWAY_POLICY_DIR": str(self.settings.policy_dir),
        }
        if self.name != "sqlite":
            env |= {"GATEWAY_RECORD_KEY": RECORD_KEY, "GATEWAY_CACHE_KEY": CACHE_KEY}
        if self.sequenced:
            env["GATEWAY_INTEGRATOR_PUBLIC_KEYS"] = INTEGRATOR.public_key
        return env

    def stop_removals(self) -> None:
        """As if the process died after its erasure events committed: removal fails."""
        if self.raw.dialect == "sqlite":
            self.raw.execute(
                "CREATE TRIGGER stop_removal BEFORE INSERT ON erased_content "
                "BEGIN SELECT RAISE(ABORT, 'killed'); END"
            )
            return
        self.raw.execute(
            "CREATE FUNCTION stop_removal() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'killed'; END $$"
        )
        self.raw.execute(
            "CREATE TRIGGER stop_removal BEFORE INSERT ON erased_content "
            "FOR EACH ROW EXECUTE FUNCTION stop_removal()"
        )

    def allow_removals(self) -> None:
        if self.raw.dialect == "sqlite":
            self.raw.execute("DROP TRIGGER stop_removal")
        else:
            self.raw.execute("DROP TRIGGER stop_removal ON erased_content")


@pytest.fixture(params=FORMATS)
def log(
    request: pytest.FixtureRequest, settings: Settings, make_gateway: MakeGateway
) -> Iterator[Log]:
    name = request.param
    if name == "sqlite":
        make_gateway().close()  # the database exists and is migrated
        raw = Raw(settings.database_url)
        yield Log(name, settings, make_gateway, raw)
        raw.close()
        return
    url: str = request.getfixturevalue("pg_url")
    upgrade(url)
    changes: dict[str, Any] = {
        "database_url": url,
        "record_key": RECORD_KEY,
        "cache_key": CACHE_KEY,
        "audit_format": 2 if name == "postgres-2" else 1,
        "integrator_public_keys": (INTEGRATOR.public_key,) if name == "postgres-2" else (),
    }
    make_gateway(**changes).close()  # format 2 begins here
    on_pg = Settings(**{**settings.model_dump(), **changes})
    raw = Raw(url)
    yield Log(name, on_pg, lambda: make_gateway(**changes), raw)
    raw.close()


def payload_rows(log: Log) -> int:
    return int(log.raw.execute("SELECT count(*) FROM payloads")[0][0])


def test_purged_content_is_erased_by_policy_not_tampering(log: Log) -> None:
    gw = log.gateway()
    first = gw.complete("compliance_review", PROMPT)
    kept = gw.complete("quant_strategy", "FX momentum")  # no retention class: kept
    before = payload_rows(log)
    with Erasing.open(log.settings) as erasing:
        preview = erasing.purge(actor="ops", dry_run=True, now=LATER)
        assert (preview.requests_erased, payload_rows(log)) == (1, before)
        report = erasing.purge(actor="ops", now=LATER)
    assert report.requests_erased == 1 and report.payloads_removed >= 2
    assert payload_rows(log) == before - report.payloads_removed
    log.integrate()  # format 2: the erasure event linked and checkpointed like any other

    verified = log.verify()

    assert verified.ok, verified.defects
    assert verified.content_erased == report.payloads_removed
    with Auditing.open(log.settings) as auditing:
        [erasure] = [e for e in auditing.request_events(first.request_id) if e.kind == "erasure"]
        assert auditing.request_events(kept.request_id)
    assert [(n.request_id, n.seq) for n in verified.erasures] == [(first.request_id, erasure.seq)]
    if log.sequenced:
        assert erasure.seq >= (verified.sequenced_from or 0)
        assert verified.integrator_checkpoints_checked
    cli = CliRunner().invoke(main, ["audit", "verify"], env=log.env())
    assert cli.exit_code == 0, cli.output
    assert f"{first.request_id}: erased by policy (event seq {erasure.seq})" in cli.output


def test_an_erasure_still_pending_integration_excuses_its_content(log: Log) -> None:
    first = log.gateway().complete("compliance_review", PROMPT)
    with Erasing.open(log.settings) as erasing:
        report = erasing.erase(
            [first.request_id], rule="subject_request", reason="DSAR-1", actor="j", approver="d"
        )
    verified = log.verify()  # nothing integrated: on format 2 every event is pending
    assert verified.ok, verified.defects
    assert [(n.request_id, n.seq) for n in verified.erasures] == [
        (first.request_id, report.erased[first.request_id])
    ]


def test_content_deleted_without_an_erasure_event_is_tampering(log: Log) -> None:
    log.gateway().complete("compliance_review", PROMPT)
    log.raw.unguard()  # the file's holder or the tables' owner, past the triggers
    log.raw.execute("DELETE FROM payloads")
    report = log.verify()
    assert not report.ok
    assert {d.kind for d in report.defects} == {"missing_content"}
    cli = CliRunner().invoke(main, ["audit", "verify"], env=log.env())
    assert cli.exit_code == 1, cli.output


def test_a_planted_erased_content_row_does_not_excuse_a_deletion(log: Log) -> None:
    gw = log.gateway()
    gone = gw.complete("compliance_review", PROMPT)
    other = gw.complete("quant_strategy", "FX momentum")
    with Erasing.open(log.settings) as erasing:
        erasing.purge(actor="ops", now=LATER)  # a real erasure event to point at
    with AuditStore.open(log.settings.database_url) as store:
        [response] = [e for e in store.events_for_request(other.request_id) if e.kind == "response"]
        erasure = next(e for e in store.events_for_request(gone.request_id) if e.kind == "erasure")
    digest = response.payload_digests["response_body"]
    log.raw.unguard()
    log.raw.execute("INSERT INTO erased_content VALUES (?, ?)", (digest, erasure.seq))
    log.raw.execute("DELETE FROM payloads WHERE digest = ?", (digest,))
    report = log.verify()
    assert not report.ok
    assert any(
        d.kind == "missing_content" and "without an erasure" in d.detail for d in report.defects
    )


def test_content_erased_before_the_event_that_names_it_is_tampering(log: Log) -> None:
    """An erasure event may excuse only content named by events before it."""
    gw = log.gateway()
    first = gw.complete("compliance_review", PROMPT)
    with Erasing.open(log.settings) as erasing:
        report = erasing.erase(
            [first.request_id], rule="other", reason="test", actor="j", approver="d"
        )
    with AuditStore.open(log.settings.database_url) as store:
        [request] = [e for e in store.events_for_request(first.request_id) if e.kind == "request"]
        # A later event naming the erased content (written past the store's own checks).
        store.append(
            EventDraft(
                kind=EventKind.ATTEMPT_FAILED,
                request_id=first.request_id,
                request_hash=request.request_hash,
                data={"error": "x"},
                payloads={},
            )
        )
    seq = report.erased[first.request_id]
    with AuditStore.open(log.settings.database_url) as store:
        later = max(e.seq for e in store.events_for_request(first.request_id))
    body = log.raw.body(later)
    digest = request.payload_digests["request_body"]
    named = b'"payloads":{"request_body":"' + digest.encode() + b'"}'
    forged = body.replace(b'"payloads":{}', named)
    assert forged != body
    log.raw.unguard()
    log.raw.execute("UPDATE events SET body = ? WHERE seq = ?", (forged, later))
    report_after = log.verify()
    assert any(
        d.seq == later and d.kind == "missing_content" and f"erasure seq {seq} precedes" in d.detail
        for d in report_after.defects
    ), report_after.defects


def test_a_purge_stopped_between_event_and_removal_is_completed_by_the_next(log: Log) -> None:
    log.gateway().complete("compliance_review", PROMPT)
    log.stop_removals()
    with Erasing.open(log.settings) as erasing:
        with pytest.raises(Exception, match="could not be removed"):
            erasing.purge(actor="ops", now=LATER)
        log.allow_removals()
        assert log.verify().ok  # content still there under its event: intact
        again = erasing.purge(actor="ops", now=LATER)
    assert (again.requests_erased, again.resumed_events) == (0, 1)
    assert again.payloads_removed >= 2
    report = log.verify()
    assert report.ok, report.defects
    with AuditStore.open(log.settings.database_url) as store:
        assert len(list(store.iter_events(kind="erasure"))) == 1  # nothing erased twice


def test_held_content_is_not_erased_until_released(log: Log) -> None:
    held = log.gateway().complete("compliance_review", PROMPT)
    with Erasing.open(log.settings) as erasing:
        hold = erasing.hold(HoldScope(task="compliance_review"), reason="Case 1", actor="legal")
        assert [h.hold_id for h in erasing.holds()] == [hold.hold_id]
        assert erasing.purge(actor="ops", now=LATER).requests_erased == 0
        with pytest.raises(ErasureRefused, match=f"legal hold {hold.hold_id}"):
            erasing.erase(
                [held.request_id], rule="subject_request", reason="D", actor="j", approver="d"
            )
        erasing.release(hold.hold_id, reason="case closed", actor="legal")
        assert erasing.purge(actor="ops", now=LATER).requests_erased == 1
    assert log.verify().ok


def test_a_forged_erasure_decides_nothing_and_verify_names_it(log: Log) -> None:
    first = log.gateway().complete("compliance_review", PROMPT)
    with AuditStore.open(log.settings.database_url) as store:  # no record key: unsigned
        forged = store.append(
            EventDraft(kind=EventKind.ERASURE, request_id=first.request_id, data={"erased": []})
        )
    with pytest.raises(IntegrityAlert, match="erasure event"):
        log.gateway().complete("compliance_review", PROMPT)
    report = log.verify()
    assert any(d.seq == forged.seq and d.kind == "unsigned" for d in report.defects)


def test_a_content_export_of_an_erased_request_verifies_offline(log: Log, tmp_path: Path) -> None:
    gw = log.gateway()
    first = gw.complete("compliance_review", PROMPT)
    gw.complete("compliance_review", PROMPT)  # a cache hit of the answer that goes
    gw.complete("quant_strategy", "FX momentum")
    with Erasing.open(log.settings) as erasing:
        erasing.purge(actor="ops", now=LATER)
    log.integrate()
    out = tmp_path / "export.jsonl"
    runner = CliRunner()
    export = ["audit", "export", "--format", "jsonl", "--with-content", "--reviewer", "r"]
    exported = runner.invoke(main, [*export, "-o", str(out)], env=log.env())
    assert exported.exit_code == 0, exported.output
    signer = record_signer(log.settings, create=False)
    assert signer is not None
    public = tmp_path / "record.pub"
    public.write_text(signer.public_key + "\n")
    keys = ["--public-key", str(public)]
    if log.sequenced:
        integrator = tmp_path / "integrator.pub"
        integrator.write_text(INTEGRATOR.public_key + "\n")
        keys += ["--integrator-public-key", str(integrator)]
    lines = out.read_text().splitlines()
    assert sum('"erased"' in line and first.request_id in line for line in lines) >= 1
    checked = runner.invoke(main, ["audit", "verify", "--export", str(out), *keys], env=log.env())
    assert checked.exit_code == 0, checked.output


def test_a_live_replay_copy_goes_with_the_request_it_replays(
    log: Log, fake_api: FakeMessagesAPI
) -> None:
    original = log.gateway().complete("compliance_review", PROMPT, subject="customer-7")
    run_id = replay_live(log.settings, fake_api.base_url, original.request_id, None)
    with AuditStore.open(log.settings.database_url) as store:
        copies = [e for e in store.events_for_request(run_id) if e.kind is EventKind.REPLAY]
    digests = sorted({d for e in copies for d in e.payload_digests.values()})
    assert digests
    with Erasing.open(log.settings) as erasing:
        report = erasing.erase_subject("customer-7", reason="DSAR", actor="j", approver="d")
    marks = ", ".join("?" * len(digests))
    left = log.raw.execute(f"SELECT digest FROM payloads WHERE digest IN ({marks})", tuple(digests))
    assert left == []
    log.integrate()
    verified = log.verify()
    assert verified.ok, verified.defects
    assert [(n.request_id, n.seq) for n in verified.erasures] == [
        (original.request_id, report.erased[original.request_id])
    ]
