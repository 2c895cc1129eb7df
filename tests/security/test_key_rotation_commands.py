"""Key rotation as commands (issue 27, item 5): caller keys with a grace period, the checkpoint
key on the record, and `gateway keys list` showing every key a server would trust.

Before: a caller key could only be revoked (its callers cut off at once, or a new key issued
and the old one revoked by hand, with no record tying the two); a checkpoint key could only be
swapped in the environment, leaving auditors no record of which key signed from when; and
`keys list` showed caller keys only.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

from click.testing import CliRunner, Result
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit import AuditStore, EventDraft, EventKind
from audit.store.signing import Signer
from gateway import Settings
from gateway.callers import CallerKeys, KeyRing
from gateway.cli import main
from gateway.keys import KeyKind, new_key_file

OLD_RECORD = Signer.from_text("a1" * 32)
NEW_RECORD = Signer.from_text("b2" * 32)


def cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        "GATEWAY_DURABILITY": "os",
        "GATEWAY_RECORD_KEY": NEW_RECORD.seed_hex(),
        **extra,
    }


def _create(env: dict[str, str], caller: str = "payments-svc") -> dict[str, object]:
    done = cli(env, "keys", "create", "--caller", caller, "--format", "json")
    assert done.exit_code == 0, done.output
    issued: dict[str, object] = json.loads(done.stdout)
    return issued


def _ring(env: dict[str, str]) -> tuple[CallerKeys, KeyRing]:
    settings = Settings(
        database_url=env["GATEWAY_DATABASE_URL"], trusted_keys=(NEW_RECORD.public_key,)
    )
    keys = CallerKeys.open(settings, create=False)
    ring = KeyRing(keys)
    ring.refresh()
    return keys, ring


def test_a_rotated_caller_key_works_beside_the_new_one_until_its_grace_ends(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    old = _create(env)
    rotated = cli(
        env, "keys", "rotate-caller", str(old["key_id"]), "--grace", "3s", "--format", "json"
    )
    assert rotated.exit_code == 0, rotated.output
    new = json.loads(rotated.stdout)
    assert new["replaces"] == old["key_id"] and new["caller"] == "payments-svc"
    assert str(new["key"]).startswith("gwk_") and new["key"] != old["key"]

    keys, ring = _ring(env)
    with keys:
        assert ring.authenticate(str(old["key"])) is not None  # in its grace: both work
        assert ring.authenticate(str(new["key"])) is not None
        listed = json.loads(cli(env, "keys", "list", "--format", "json").stdout)
        by_id = {k["key_id"]: k for k in listed["caller_keys"]}
        assert by_id[old["key_id"]]["replaced_by"] == new["key_id"]
        assert by_id[old["key_id"]]["grace_until"] and by_id[old["key_id"]]["active"]
        text = cli(env, "keys", "list").stdout
        assert f"rotated to {new['key_id']}" in text and "accepted until" in text

        time.sleep(3.5)
        assert ring.authenticate(str(old["key"])) is None  # the grace is over
        assert ring.authenticate(str(new["key"])) is not None
        ring.refresh()
        assert ring.authenticate(str(old["key"])) is None

    # The record says it: the new key names the one it replaces, and the old key's
    # revocation names its successor and the moment it is refused.
    with AuditStore.open(env["GATEWAY_DATABASE_URL"], create=False) as store:
        (revocation,) = store.iter_events(kind=EventKind.CALLER_KEY_REVOKED)
        issued = [e for e in store.iter_events(kind=EventKind.CALLER_KEY)]
    assert revocation.data["replaced_by"] == new["key_id"]
    assert revocation.data["grace_until"] == new["old_key_refused_from"]
    assert issued[-1].data["replaces"] == old["key_id"]
    assert str(old["key"]) not in json.dumps([e.data for e in issued])
    verified = cli(env, "audit", "verify")
    assert verified.exit_code == 0, verified.output


def test_a_key_in_its_grace_can_still_be_revoked_at_once_and_rotated_only_once(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    old = _create(env)
    first = cli(env, "keys", "rotate-caller", str(old["key_id"]), "--grace", "1h")
    assert first.exit_code == 0, first.output
    again = cli(env, "keys", "rotate-caller", str(old["key_id"]))
    assert again.exit_code == 2 and "already rotated" in again.stderr, again.output
    revoked = cli(env, "keys", "revoke", str(old["key_id"]))
    assert revoked.exit_code == 0, revoked.output
    keys, ring = _ring(env)
    with keys:
        assert ring.authenticate(str(old["key"])) is None


def test_a_zero_grace_refuses_the_old_key_at_once_and_bad_durations_are_one_line(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    old = _create(env)
    for bad in ("soon", "-5m", "400d"):
        refused = cli(env, "keys", "rotate-caller", str(old["key_id"]), "--grace", bad)
        assert refused.exit_code == 2 and "--grace" in refused.stderr, refused.output
        assert "Traceback" not in refused.output
    done = cli(env, "keys", "rotate-caller", str(old["key_id"]), "--grace", "0")
    assert done.exit_code == 0 and "refused from now on" in done.stderr, done.output
    keys, ring = _ring(env)
    with keys:
        assert ring.authenticate(str(old["key"])) is None
        assert ring.authenticate(done.stdout.strip()) is not None
    unknown = cli(env, "keys", "rotate-caller", "key_0000000000000000")
    assert unknown.exit_code == 2 and "no caller key" in unknown.stderr


def test_the_checkpoint_key_rotates_on_the_record_and_keys_list_shows_every_trusted_key(
    tmp_path: Path,
) -> None:
    old_ckpt = new_key_file(KeyKind.CHECKPOINT, tmp_path / "checkpoint-old.key")
    new_ckpt = new_key_file(KeyKind.CHECKPOINT, tmp_path / "checkpoint-new.key")
    old_env = _env(
        tmp_path,
        GATEWAY_RECORD_KEY=OLD_RECORD.seed_hex(),
        GATEWAY_CHECKPOINT_KEY=(tmp_path / "checkpoint-old.key").read_text().strip(),
    )
    _create(old_env)
    env = _env(
        tmp_path,
        GATEWAY_TRUSTED_KEYS=OLD_RECORD.public_key,
        GATEWAY_CHECKPOINT_KEY=(tmp_path / "checkpoint-new.key").read_text().strip(),
    )
    record = cli(env, "keys", "rotate-record", "--retire", OLD_RECORD.key_id)
    assert record.exit_code == 0, record.output
    rotated = cli(
        env,
        "keys",
        "rotate-checkpoint",
        "--retire",
        str(old_ckpt.public_path),
        "--old-key",
        str(old_ckpt.path),
        "--format",
        "json",
    )
    assert rotated.exit_code == 0, rotated.output
    rotation = json.loads(rotated.stdout)
    assert rotation["retired_key_id"] == old_ckpt.key_id
    assert rotation["key_id"] == new_ckpt.key_id

    listed = json.loads(cli(env, "keys", "list", "--format", "json").stdout)
    record_keys = {k["key_id"]: k for k in listed["record_keys"]}
    assert record_keys[NEW_RECORD.key_id]["source"] == "signer"
    assert record_keys[OLD_RECORD.key_id]["source"] == "trusted"
    assert record_keys[OLD_RECORD.key_id]["first_seq"] == 1
    assert record_keys[OLD_RECORD.key_id]["retired_by"] == NEW_RECORD.key_id
    assert record_keys[NEW_RECORD.key_id]["retired_seq"] is None
    checkpoint_keys = {k["key_id"]: k for k in listed["checkpoint_keys"]}
    assert checkpoint_keys[old_ckpt.key_id]["retired_seq"] == rotation["seq"]
    assert checkpoint_keys[old_ckpt.key_id]["configured"] is False
    assert checkpoint_keys[new_ckpt.key_id] == {
        "key_id": new_ckpt.key_id,
        "public_key": new_ckpt.public_key,
        "configured": True,
        "since_seq": rotation["seq"],
        "retired_seq": None,
        "endorsed": True,
    }
    text = cli(env, "keys", "list").stdout
    assert "RECORD KEYS" in text and "CHECKPOINT KEYS" in text
    assert f"from seq {rotation['seq']}" in text

    # Each kind rotated once; verify reads both record-key eras and the rotations as intact.
    verified = cli(env, "audit", "verify")
    assert verified.exit_code == 0, verified.output

    again = cli(
        env, "keys", "rotate-checkpoint", "--retire", old_ckpt.public_key, "--old-key",
        str(old_ckpt.path),
    )  # fmt: skip
    assert again.exit_code == 2 and "already retired" in again.stderr, again.output
    back = cli(
        {**env, "GATEWAY_CHECKPOINT_KEY": (tmp_path / "checkpoint-old.key").read_text()},
        "keys",
        "rotate-checkpoint",
        "--retire",
        new_ckpt.public_key,
        "--old-key",
        str(new_ckpt.path),
    )
    assert back.exit_code == 2 and "already retired" in back.stderr, back.output


def test_checkpoint_rotation_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    ckpt = new_key_file(KeyKind.CHECKPOINT, tmp_path / "checkpoint.key")
    env = _env(tmp_path)
    _create(env)
    missing = cli(env, "keys", "rotate-checkpoint", "--retire", ckpt.public_key)
    assert missing.exit_code == 2 and "GATEWAY_CHECKPOINT_KEY" in missing.stderr
    env["GATEWAY_CHECKPOINT_KEY"] = (tmp_path / "checkpoint.key").read_text().strip()
    itself = cli(env, "keys", "rotate-checkpoint", "--retire", ckpt.public_key)
    assert itself.exit_code == 2 and "is the configured checkpoint key" in itself.stderr
    garbage = cli(env, "keys", "rotate-checkpoint", "--retire", "not-a-key")
    assert garbage.exit_code == 2 and "not an Ed25519 public key" in garbage.stderr
    other = new_key_file(KeyKind.CHECKPOINT, tmp_path / "other.key")
    unsigned = cli(env, "keys", "rotate-checkpoint", "--retire", other.public_key)
    assert unsigned.exit_code == 2 and "--old-key FILE" in unsigned.stderr, unsigned.output
    wrong = cli(
        env, "keys", "rotate-checkpoint", "--retire", other.public_key, "--old-key",
        str(tmp_path / "checkpoint.key"),
    )  # fmt: skip
    assert wrong.exit_code == 2 and "is not the key being retired" in wrong.stderr, wrong.output
    for done in (missing, itself, garbage, unsigned, wrong):
        assert "Traceback" not in done.output


def test_a_checkpoint_rotation_that_does_not_check_out_names_no_key(tmp_path: Path) -> None:
    """A row written with a record key the gateway does not trust (or without the new key's
    proof of possession) must not make `keys list` present its key as a checkpoint key."""
    env = _env(tmp_path)
    _create(env)
    intruder = Signer.from_text("cd" * 32)
    planted = Signer.from_text("ef" * 32)
    with AuditStore.open(env["GATEWAY_DATABASE_URL"], signer=intruder) as store:
        store.append(
            EventDraft(
                kind=EventKind.CHECKPOINT_KEY_ROTATION,
                request_id="checkpoint_key_rotation_forged",
                data={"retired_public_key": "ab" * 32, "public_key": planted.public_key},
            )
        )
    with AuditStore.open(env["GATEWAY_DATABASE_URL"], signer=NEW_RECORD) as store:
        store.append(  # signed by a trusted key, but no proof that anyone holds the new key
            EventDraft(
                kind=EventKind.CHECKPOINT_KEY_ROTATION,
                request_id="checkpoint_key_rotation_unproven",
                data={
                    "retired_public_key": "ab" * 32,
                    "public_key": planted.public_key,
                    "signature": "AAAA",
                },
            )
        )
    listed = json.loads(cli(env, "keys", "list", "--format", "json").stdout)
    assert listed["checkpoint_keys"] == []


def test_the_old_checkpoint_key_signs_the_hand_over_and_a_forged_one_counts_for_nothing(
    tmp_path: Path,
) -> None:
    """The record key's holder alone (a gateway host) must not be able to hand the checkpoint
    key over to a key of their own: the retired key signs the rotation, and a rotation whose
    retired_signature does not check out names no key. A lost old key is said out loud."""
    old = new_key_file(KeyKind.CHECKPOINT, tmp_path / "old.key")
    new = new_key_file(KeyKind.CHECKPOINT, tmp_path / "new.key")
    env = _env(tmp_path, GATEWAY_CHECKPOINT_KEY=new.path.read_text().strip())
    _create(env)
    # Without the old key, refused (nothing written); with --unsafe-old-key-lost, recorded
    # and listed as not endorsed.
    refused = cli(env, "keys", "rotate-checkpoint", "--retire", old.public_key)
    assert refused.exit_code == 2 and "needs that key's signature" in refused.stderr
    lost = cli(
        env, "keys", "rotate-checkpoint", "--retire", old.public_key, "--unsafe-old-key-lost"
    )
    assert lost.exit_code == 0 and "warning" in lost.stderr, lost.output
    listed = json.loads(cli(env, "keys", "list", "--format", "json").stdout)
    by_id = {k["key_id"]: k for k in listed["checkpoint_keys"]}
    assert by_id[new.key_id]["endorsed"] is False
    assert "not endorsed by the key it replaced" in cli(env, "keys", "list").stdout

    # A rotation with a retired_signature that is not the old key's is an altered record.
    planted = new_key_file(KeyKind.CHECKPOINT, tmp_path / "planted.key")
    statement = (
        "compliance-gateway checkpoint key rotation v1\n"
        f"{_store_id(env)}\n{new.public_key}\n{planted.public_key}\n"
    ).encode("ascii")
    own = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(planted.path.read_text().strip()))
    with AuditStore.open(env["GATEWAY_DATABASE_URL"], signer=NEW_RECORD) as store:
        store.append(
            EventDraft(
                kind=EventKind.CHECKPOINT_KEY_ROTATION,
                request_id="checkpoint_key_rotation_self_endorsed",
                data={
                    "retired_public_key": new.public_key,
                    "public_key": planted.public_key,
                    "signature": base64.b64encode(own.sign(statement)).decode("ascii"),
                    "retired_signature": base64.b64encode(own.sign(statement)).decode("ascii"),
                },
            )
        )
    listed = json.loads(cli(env, "keys", "list", "--format", "json").stdout)
    by_id = {k["key_id"]: k for k in listed["checkpoint_keys"]}
    assert planted.key_id not in by_id and by_id[new.key_id]["retired_seq"] is None


def _store_id(env: dict[str, str]) -> str:
    with AuditStore.open(env["GATEWAY_DATABASE_URL"], create=False) as store:
        return store.store_id
