"""CLI manners: `audit checkpoint` says what it made and where it wrote; an empty selection
says so and names the tasks a selection could use."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from audit import AuditStore
from gateway.cli import main

SHIPPED = Path(__file__).resolve().parents[2] / "policies"
KEY = "11" * 32


def run(url: str, *args: str, **env: str) -> Result:
    base = {"GATEWAY_DATABASE_URL": url, "GATEWAY_POLICY_DIR": str(SHIPPED)}
    return CliRunner().invoke(main, list(args), env={**base, **env})


def test_checkpoint_says_seq_head_signer_and_where(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()
    path = tmp_path / "head.json"
    made = run(url, "audit", "checkpoint", "-o", str(path), GATEWAY_CHECKPOINT_KEY=KEY)
    assert made.exit_code == 0, made.output
    head = json.loads(path.read_text())
    assert made.stdout == ""
    assert made.stderr.startswith(f"checkpoint at seq {head['seq']}, head {head['hash']}, ")
    assert "signed by ed25519:" in made.stderr and f"written to {path}" in made.stderr
    unsigned = run(url, "audit", "checkpoint", "--unsigned")
    assert json.loads(unsigned.stdout)["signature"] is None  # stdout is the checkpoint alone
    assert "UNSIGNED" in unsigned.stderr and "written to standard output" in unsigned.stderr


def test_an_empty_selection_says_so_and_lists_known_tasks(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()
    listed = run(url, "audit", "list", "--task", "compliance_reveiw")
    assert listed.exit_code == 0
    assert "no requests match --task compliance_reveiw" in listed.stderr
    assert "known tasks" in listed.stderr and "compliance_review" in listed.stderr
    usage = run(url, "audit", "usage", "--by", "task", "--task", "nope")
    assert "no recorded usage matches" in usage.stderr and "compliance_review" in usage.stderr
    replayed = run(url, "replay", "--task", "nope")
    assert replayed.exit_code == 0
    assert "no recorded requests match the selection" in replayed.stderr
    assert "sanctions_screening" in replayed.stderr
