"""`gateway keys new KIND --out FILE`: every signing key made by a command, never by hand.

Before it, the only way to make a record, checkpoint, integrator, witness or approver key was
the Python one-liner that the error messages printed, and nothing wrote the public half that
auditors and other instances are given.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore
from audit.store.signing import Signer
from gateway.cli import main

KINDS = ["record", "checkpoint", "integrator", "witness", "approver"]


def cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_key_is_private_and_its_public_half_is_beside_it(tmp_path: Path, kind: str) -> None:
    out = tmp_path / f"{kind}.key"
    made = cli({}, "keys", "new", kind, "--out", str(out), "--format", "json")
    assert made.exit_code == 0, made.output
    shown = json.loads(made.stdout)

    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    signer = Signer.from_file(out)
    public_file = Path(shown["public_key_file"])
    assert public_file == tmp_path / f"{kind}.key.pub"
    lines = [x for x in public_file.read_text().splitlines() if not x.startswith("#")]
    assert lines == [signer.public_key] == [shown["public_key"]]
    assert shown["key_id"] == signer.key_id and shown["kind"] == kind


def test_the_text_output_says_where_each_half_goes(tmp_path: Path) -> None:
    out = tmp_path / "record.key"
    made = cli({}, "keys", "new", "record", "--out", str(out))
    assert made.exit_code == 0, made.output
    assert made.stdout.strip() == Signer.from_file(out).public_key
    assert f"GATEWAY_RECORD_KEY_FILE={out}" in made.stderr
    assert "GATEWAY_TRUSTED_KEYS_FILE" in made.stderr


def test_an_existing_key_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "record.key"
    assert cli({}, "keys", "new", "record", "--out", str(out)).exit_code == 0
    before = out.read_text()
    again = cli({}, "keys", "new", "record", "--out", str(out))
    assert again.exit_code != 0
    assert "already exists" in again.stderr and "Traceback" not in again.output
    assert len(again.stderr.strip().splitlines()) <= 2  # the error and its hint
    assert out.read_text() == before

    # Nor its public half alone: the new private key would not match the public file.
    lone = tmp_path / "other.key"
    (tmp_path / "other.key.pub").write_text("kept\n")
    refused = cli({}, "keys", "new", "record", "--out", str(lone))
    assert refused.exit_code != 0 and not lone.exists()


def test_a_record_key_from_the_command_signs_the_log(tmp_path: Path) -> None:
    key = tmp_path / "record.key"
    assert cli({}, "keys", "new", "record", "--out", str(key)).exit_code == 0
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_RECORD_KEY_FILE": str(key)}
    created = cli(env, "keys", "create", "--caller", "payments-svc", "--format", "json")
    assert created.exit_code == 0, created.output
    with AuditStore.open(url, create=False) as store:
        event = store.event(json.loads(created.stdout)["seq"])
    assert event.key_id == Signer.from_file(key).key_id


def test_a_checkpoint_key_from_the_command_signs_a_checkpoint(tmp_path: Path) -> None:
    key = tmp_path / "checkpoint.key"
    made = cli({}, "keys", "new", "checkpoint", "--out", str(key), "--format", "json")
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_CHECKPOINT_KEY": key.read_text()}
    assert cli(env, "keys", "create", "--caller", "desk").exit_code == 0
    head = tmp_path / "head.json"
    signed = cli(env, "audit", "checkpoint", "-o", str(head))
    assert signed.exit_code == 0, signed.output
    assert json.loads(made.stdout)["key_id"] in signed.output


def test_an_unusable_key_names_the_command_that_makes_one(tmp_path: Path) -> None:
    env = {
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        "GATEWAY_RECORD_KEY": "not a key",
    }
    refused = cli(env, "keys", "create", "--caller", "desk")
    assert refused.exit_code != 0
    assert "gateway keys new record --out FILE" in refused.stderr
    assert "python -c" not in refused.stderr
