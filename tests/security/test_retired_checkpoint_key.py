"""A checkpoint key the log retired signs nothing after its rotation (issue 27, key rotation).

The attack: the old checkpoint key is stolen after `gateway keys rotate-checkpoint` retired it.
An auditor still holds its public key (its older checkpoints stay valid), so before this a
fresh checkpoint signed with it passed `audit verify --checkpoint` and `audit verify --from
--to` as evidence for the log as it is now. Both now refuse a head at or past the rotation,
and still accept what the old key signed before it.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from audit.store.signing import Signer
from gateway.cli import main
from gateway.keys import KeyKind, new_key_file

RECORD = Signer.from_text("c3" * 32)


def cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def test_a_fresh_checkpoint_by_a_retired_key_is_refused_and_its_old_ones_still_hold(
    tmp_path: Path,
) -> None:
    old = new_key_file(KeyKind.CHECKPOINT, tmp_path / "checkpoint-old.key")
    new = new_key_file(KeyKind.CHECKPOINT, tmp_path / "checkpoint-new.key")
    base = {
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        "GATEWAY_DURABILITY": "os",
        "GATEWAY_RECORD_KEY": RECORD.seed_hex(),
    }
    with_old = {**base, "GATEWAY_CHECKPOINT_KEY": old.path.read_text().strip()}
    with_new = {**base, "GATEWAY_CHECKPOINT_KEY": new.path.read_text().strip()}
    assert cli(base, "db", "upgrade").exit_code == 0
    before = tmp_path / "before.json"
    taken = cli(with_old, "audit", "checkpoint", "-o", str(before))
    assert taken.exit_code == 0, taken.output

    rotated = cli(
        with_new, "keys", "rotate-checkpoint", "--retire", str(old.public_path), "--old-key",
        str(old.path),
    )  # fmt: skip
    assert rotated.exit_code == 0, rotated.output

    # The thief of the retired key signs the log as it is now.
    stolen = tmp_path / "stolen.json"
    forged = cli(with_old, "audit", "checkpoint", "-o", str(stolen))
    assert forged.exit_code == 0, forged.output

    # The auditor pins the old key (for the checkpoints it signed before the rotation) and no
    # checkpoint key of their own.
    auditor = {**base, "GATEWAY_TRUSTED_KEYS": RECORD.public_key}
    pin = ("--public-key", str(old.public_path))
    refused = cli(auditor, "audit", "verify", "--checkpoint", str(stolen), *pin)
    assert refused.exit_code == 2, refused.output
    assert f"checkpoint key {old.key_id}" in refused.stderr
    assert "retired at seq 2" in refused.stderr
    assert "Traceback" not in refused.output

    extends = cli(auditor, "audit", "verify", "--from", str(before), "--to", str(stolen), *pin)
    assert extends.exit_code == 2, extends.output
    assert "retired at seq 2" in extends.stderr

    # What the old key signed before its rotation is still evidence.
    held = cli(auditor, "audit", "verify", "--checkpoint", str(before), *pin)
    assert held.exit_code == 0, held.output
