"""Checkpoints: Ed25519-signed heads that catch truncation, rollback and a foreign key."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from audit import AuditStore, CheckpointError, EventKind
from audit.proofs import checkpoint as checkpoints
from audit.proofs import take_checkpoint
from audit.verify import verify_log
from tests.audit.conftest import fill

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))


def test_checkpoint_is_recorded_and_signs_its_own_event(store: AuditStore) -> None:
    fill(store)
    cp = take_checkpoint(store, KEY)
    event = store.event(cp.seq)
    assert event.kind == EventKind.CHECKPOINT
    assert (cp.hash, cp.store_id) == (event.hash, store.store_id)
    assert event.data == {"signed": True, "public_key": checkpoints.public_key(KEY)}
    text = checkpoints.dumps(cp)
    assert checkpoints.loads(text, trusted_public_key=checkpoints.public_key(KEY)) == cp
    report = verify_log(store, checkpoint=cp)
    assert report.ok and report.checkpoint_seq == cp.seq


def test_a_checkpoint_signed_with_another_key_is_refused() -> None:
    cp = checkpoints.sign("db", 3, "sha256:" + "1" * 64, datetime.now(UTC), OTHER)
    with pytest.raises(CheckpointError, match="another key"):
        checkpoints.loads(checkpoints.dumps(cp), trusted_public_key=checkpoints.public_key(KEY))


def test_an_altered_checkpoint_file_is_refused() -> None:
    cp = checkpoints.sign("db", 3, "sha256:" + "1" * 64, datetime.now(UTC), KEY)
    record = json.loads(checkpoints.dumps(cp))
    record["seq"] = 2  # claim an earlier head, to hide a truncation
    with pytest.raises(CheckpointError, match="altered"):
        checkpoints.loads(json.dumps(record))


def test_unsigned_checkpoint_refused_when_a_key_is_expected() -> None:
    cp = checkpoints.sign("db", 3, "sha256:" + "1" * 64, datetime.now(UTC), None)
    assert checkpoints.loads(checkpoints.dumps(cp)).signature is None
    with pytest.raises(CheckpointError, match="not signed"):
        checkpoints.loads(checkpoints.dumps(cp), trusted_public_key=checkpoints.public_key(KEY))


def test_garbage_checkpoint_file_gets_one_line() -> None:
    with pytest.raises(CheckpointError, match="not a gateway checkpoint") as caught:
        checkpoints.loads("{}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["", "abc", "00" * 31, "zz" * 32])
def test_unusable_signing_keys_are_refused(text: str) -> None:
    with pytest.raises(CheckpointError, match="not usable"):
        checkpoints.parse_key(text)
    assert checkpoints.parse_key("ab" * 32) == bytes([0xAB]) * 32


def test_bad_key_writes_no_checkpoint_event(store: AuditStore) -> None:
    with pytest.raises(CheckpointError):
        take_checkpoint(store, b"short")
    assert store.head()[0] == 0


def test_checkpoint_from_another_database_is_refused(any_url: str, tmp_path: object) -> None:
    other_url = f"sqlite:///{tmp_path}/other.db"
    with AuditStore.open(other_url) as other:
        cp = take_checkpoint(other, KEY)
    with AuditStore.open(any_url) as store, pytest.raises(CheckpointError, match="not this one"):
        verify_log(store, checkpoint=cp)
