"""`gateway evidence REGIME` lists the period's erasures (rule, who, approved by whom) and
legal holds (scope, reason, release) in its summary and on its page."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from gateway import Gateway, Settings
from gateway.cli import main
from gateway.evidence import Erasing, HoldScope
from tests.support.standalone import run_standalone


def test_a_pack_lists_the_periods_erasures_and_holds(
    gw: Gateway, erasing: Erasing, settings: Settings, tmp_path: Path
) -> None:
    erased = gw.complete("compliance_review", "Is clause 4 fine?", caller="desk-a")
    gw.complete("compliance_review", "And clause 5?", caller="desk-b")
    erasing.erase(
        [erased.request_id], rule="subject_request", reason="DSAR-11", actor="j.smith",
        approver="dpo.k.lee",
    )  # fmt: skip
    kept = erasing.hold(HoldScope(caller="desk-b"), reason="Case <12>", actor="legal")
    gone = erasing.hold(HoldScope(task="compliance_review"), reason="Case 13", actor="legal")
    erasing.release(gone.hold_id, reason="closed", actor="legal")

    today = datetime.now(UTC).date().isoformat()
    out = tmp_path / "pack"
    built = CliRunner().invoke(
        main,
        [
            "evidence",
            "dora",
            "--from",
            today,
            "--to",
            today,
            "-o",
            str(out),
            "--reviewer",
            "a.auditor",
            "--format",
            "json",
        ],
        env={"GATEWAY_DATABASE_URL": settings.database_url, "GATEWAY_CHECKPOINT_KEY": "11" * 32},
    )
    assert built.exit_code == 0, built.output
    section = json.loads(built.stdout)["retention"]
    [listed] = section["erasures"]["listed"]
    assert section["erasures"]["count"] == 1 and section["erasures"]["by_rule"] == {
        "subject_request": 1
    }
    assert listed["request_id"] == erased.request_id
    assert (listed["rule"], listed["by"], listed["approved_by"]) == (
        "subject_request", "j.smith", "dpo.k.lee",
    )  # fmt: skip
    holds = {h["hold_id"]: h for h in section["holds"]}
    assert holds[kept.hold_id]["scope"] == {"caller": "desk-b"}
    assert holds[kept.hold_id]["released"] is None
    assert holds[gone.hold_id]["released"]["reason"] == "closed"
    page = (out / "index.html").read_text()
    assert 'id="retention"' in page and "dpo.k.lee" in page
    assert "Case &lt;12&gt;" in page and "Case <12>" not in page  # escaped


def test_a_pack_with_sealed_content_verifies_with_the_standalone_verifier(
    gw: Gateway, erasing: Erasing, settings: Settings, tmp_path: Path
) -> None:
    # Sealed payloads (audit.sealing): the export carries each one's salt, and the shipped
    # verifier, alone, re-makes the digest the signed event names from content and salt.
    gw.complete("compliance_review", "Is clause 4 fine?", caller="desk-a")
    today = datetime.now(UTC).date().isoformat()
    out = tmp_path / "pack"
    built = CliRunner().invoke(
        main,
        ["evidence", "dora", "--from", today, "--to", today, "-o", str(out),
         "--reviewer", "a.auditor", "--with-content"],
        env={"GATEWAY_DATABASE_URL": settings.database_url, "GATEWAY_CHECKPOINT_KEY": "11" * 32},
    )  # fmt: skip
    assert built.exit_code == 0, built.output
    rows = [json.loads(line) for line in (out / "export.jsonl").read_text().splitlines()]
    carried = [r for r in rows if "content" in r]
    assert carried and all(
        "salt" in p for r in carried for p in r["content"]["evidence"]["payloads"].values()
    ), carried[0]
    code, report = run_standalone(
        tmp_path, "export", out / "export.jsonl", "--keys", out / "public-keys.json"
    )
    assert code == 0, report
