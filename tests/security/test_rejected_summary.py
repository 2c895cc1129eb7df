"""A refused request's record is bounded: its REJECTED event says which overrides were
asked for, keeps small settings as given and records content and large values by size, never
megabytes of junk that was never sent anywhere. Logs written before, whose REJECTED events
hold the full overrides, still show, verify and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventDraft, EventKind
from gateway import Gateway, Settings
from gateway.cli import main
from gateway.errors import PolicyViolation
from gateway.keys import record_signer
from tests.gateway.conftest import events

JUNK = "x" * (4 * 1024 * 1024 - 64)  # just under the body limit's worth of system prompt


def rejected_data(db_path: Path, request_id: str) -> tuple[dict[str, object], int]:
    [event] = [e for e in events(db_path) if e.request_id == request_id]
    assert str(event.kind) == "rejected"
    return event.data, len(event.body)


def test_a_refused_megabyte_override_is_recorded_by_size_alone(gw: Gateway, db_path: Path) -> None:
    with pytest.raises(PolicyViolation) as refused:
        gw.complete(
            "compliance_review",
            "Transaction 1",
            caller="desk-a",
            overrides={"system": JUNK, "temperature": 0.9},
        )
    request_id = refused.value.request_id
    assert request_id is not None
    data, size = rejected_data(db_path, request_id)
    assert size < 4096, size  # was 4.77 MB per refused request
    assert data["requested"] == {"temperature": 0.9}  # small values as given
    # No digest: a digest of a short prompt would let anyone confirm a guess of it.
    assert data["requested_omitted"] == {"system": {"bytes": len(JUNK) + 2}}


def test_a_refused_short_system_prompt_leaves_no_text_in_the_log(
    gw: Gateway, db_path: Path
) -> None:
    """A caller's own text is content even when it is short: a REJECTED event (which a
    PostgreSQL reviewer reads without an ACCESS record, and no erasure can change) names it
    by size only."""
    with pytest.raises(PolicyViolation) as refused:
        gw.complete(
            "compliance_review",
            "Transaction 3",
            caller="desk-a",
            overrides={"system": "Client Jane Roe, account 4711"},
        )
    assert refused.value.request_id is not None
    data, _ = rejected_data(db_path, refused.value.request_id)
    assert "Jane Roe" not in json.dumps(data)
    assert data["requested_omitted"] == {"system": {"bytes": 31}}


def test_a_refused_request_with_thousands_of_keys_is_recorded_bounded(
    gw: Gateway, db_path: Path
) -> None:
    many = {f"key_{n}_" + "k" * 500: n for n in range(5000)}
    with pytest.raises(PolicyViolation) as refused:
        gw.complete("compliance_review", "Transaction 2", caller="desk-a", overrides=many)
    assert refused.value.request_id is not None
    data, size = rejected_data(db_path, refused.value.request_id)
    assert size < 64 * 1024, size
    assert data["requested_keys_omitted"] == 5000 - 64
    assert len(data["requested"]) == 64  # type: ignore[arg-type]


def test_an_old_rejected_event_with_full_overrides_still_shows_verifies_and_exports(
    tmp_path: Path, policy_dir: Path, db_path: Path
) -> None:
    url = f"sqlite:///{db_path}"
    settings = Settings(policy_dir=policy_dir, database_url=url, durability="os")
    with Gateway(settings, offline=True):
        pass  # the database and the record key, as a gateway made them
    signer = record_signer(settings, create=False)
    with AuditStore.open(url, durability="os", signer=signer) as store:
        store.append(
            EventDraft(
                kind=EventKind.REJECTED,
                request_id="req_old_rejected",
                task="compliance_review",
                caller="desk-a",
                data={
                    "error": "PolicyViolation",
                    "key": "system",
                    "reason": "the override system is not allowed",
                    "requested": {"system": "y" * 1_000_000, "temperature": 0.9},
                },
            )
        )
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "GATEWAY_DURABILITY": "os",
    }
    runner = CliRunner()
    shown = runner.invoke(main, ["audit", "show", "req_old_rejected", "--format", "json"], env=env)
    assert shown.exit_code == 0, shown.output
    assert "req_old_rejected" in shown.output
    verified = runner.invoke(main, ["audit", "verify"], env=env)
    assert verified.exit_code == 0, verified.output
    out = tmp_path / "export.jsonl"
    exported = runner.invoke(main, ["audit", "export", "--output", str(out)], env=env)
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert any("req_old_rejected" in json.dumps(line) for line in lines)
