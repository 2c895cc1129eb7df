"""`gateway keys public`: the record, checkpoint and integrator public keys an auditor needs,
each kind apart, from a command (the walkthrough's `record.pub` no longer appears from
nowhere); never a private key."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from audit.proofs.checkpoint import public_key
from audit.store.signing import Signer
from gateway.cli import main

RECORD = Signer.from_text("aa" * 32)
PARTNER = Signer.from_text("bb" * 32).public_key
INTEGRATOR = Signer.from_text("cc" * 32).public_key
CHECKPOINT = "dd" * 32


def cli(tmp_path: Path, *args: str) -> Result:
    env = {
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        "GATEWAY_RECORD_KEY": "aa" * 32,
        "GATEWAY_TRUSTED_KEYS": PARTNER,
        "GATEWAY_CHECKPOINT_KEY": CHECKPOINT,
        "GATEWAY_INTEGRATOR_PUBLIC_KEYS": INTEGRATOR,
    }
    return CliRunner().invoke(main, ["keys", "public", *args], env=env)


def test_every_kind_is_written_apart_and_no_secret_is(tmp_path: Path) -> None:
    out = tmp_path / "public-keys.json"
    done = cli(tmp_path, "--out", str(out))
    assert done.exit_code == 0, done.output
    keys = json.loads(out.read_text())
    assert keys["format"] == "compliance-gateway public keys v1"
    assert sorted(keys["record"]) == sorted([RECORD.public_key, PARTNER])
    assert keys["checkpoint"] == [public_key(bytes.fromhex(CHECKPOINT))]
    assert keys["integrator"] == [INTEGRATOR]
    assert "aa" * 32 not in out.read_text() and CHECKPOINT not in out.read_text()
    assert "2 record, 1 checkpoint, 1 integrator" in done.stderr


def test_one_kind_is_a_file_that_public_key_reads(tmp_path: Path) -> None:
    out = tmp_path / "record.pub"
    assert cli(tmp_path, "--kind", "record", "--out", str(out)).exit_code == 0
    assert sorted(out.read_text().split()) == sorted([RECORD.public_key, PARTNER])
    printed = cli(tmp_path, "--kind", "checkpoint")
    assert printed.stdout == public_key(bytes.fromhex(CHECKPOINT)) + "\n"
