"""Verified checkpoints: a verify that passed in full signs that it checked every record
signature through its head; a later `verify --since-verified` still recomputes every link and
lifecycle check from seq 1, and checks signatures only after that head.

Each attack below must be found although the later verify checks no signature before the
checkpoint's seq: an altered body, a self-consistent rewrite, a planted row after it, an
edited signature column, a checkpoint by an untrusted key, a forked log."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit import (
    AuditStore,
    Checkpoint,
    CheckpointError,
    DefectKind,
    EventDraft,
    EventKind,
    VerifyReport,
)
from audit.canonical import canonical_bytes
from audit.proofs import checkpoint as checkpoints
from audit.proofs import take_checkpoint, verified_checkpoint
from audit.proofs.merkle import tree_head
from audit.proofs.receipts import TreeCheckpoint, checked_checkpoint, log_leaves, origin
from audit.store.chain import event_body, link_hash
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify import verify_log
from gateway.cli import main
from tests.audit.conftest import Raw, fill

RECORD = Signer.from_text("42" * 32)
KEY = bytes(range(32))  # the checkpoint key
OTHER = bytes(range(1, 33))
TRUST = Trust(TrustedKeys.of([RECORD.public_key]))


def _verified(store: AuditStore, key: bytes = KEY) -> Checkpoint:
    report = verify_log(store, trust=TRUST, measure_head=True)
    assert report.ok, report.defects
    return checkpoints.loads(checkpoints.dumps(verified_checkpoint(store, report, key)))


def _since(store: AuditStore, cp: Checkpoint, pins: set[str] | None = None) -> VerifyReport:
    pins = pins if pins is not None else {checkpoints.public_key(KEY)}
    relied = checkpoints.relied_on(cp, TRUST.keys, pins)
    return verify_log(store, trust=TRUST, relied=relied)


@pytest.fixture
def signed(any_url: str) -> Iterator[AuditStore]:
    with AuditStore.open(any_url, signer=RECORD) as store:
        fill(store, requests=4)
        yield store


def _append_more(store: AuditStore, n: int = 2) -> None:
    for i in range(n):
        store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"later-{i}", task="t"))


def test_since_verified_checks_signatures_only_after_it_and_says_so(signed: AuditStore) -> None:
    cp = _verified(signed)
    assert cp.verified is not None and cp.version == 2 and cp.tree_size == cp.seq
    _append_more(signed)
    report = _since(signed, cp)
    assert report.ok, report.defects
    assert report.signatures_checked_from == cp.seq + 1
    assert report.events_checked == cp.seq + 2  # every event walked from seq 1
    assert not report.tree_root_checked  # implied by the links and the hash at its seq


def test_an_altered_body_before_the_checkpoint_is_found(signed: AuditStore, raw: Raw) -> None:
    cp = _verified(signed)
    raw.unguard()
    body = raw.body(3).replace(b'"task":"compliance_review"', b'"task":"compliance_revie_"')
    raw.execute("UPDATE events SET body = ? WHERE seq = 3", (body,))
    report = _since(signed, cp)
    assert not report.ok and report.first_bad_seq == 3
    assert DefectKind.HASH_MISMATCH in {d.kind for d in report.defects}


def test_a_rewritten_history_before_the_checkpoint_is_found(signed: AuditStore, raw: Raw) -> None:
    """The attacker re-links every hash after the edit (a self-consistent chain): the hash at
    the checkpoint's seq then differs from the one the checkpoint signed."""
    cp = _verified(signed)
    raw.unguard()
    rows = raw.execute("SELECT seq, body, prev_hash FROM events ORDER BY seq")
    prev = str(rows[1][2])
    for seq, body, _ in rows[1:]:
        body = bytes(body)
        if seq == 2:
            body = body.replace(b'"caller":"payments-svc"', b'"caller":"payments-svX"')
            raw.execute("UPDATE events SET caller = 'payments-svX' WHERE seq = 2")
        new = link_hash(prev, body)
        raw.execute(
            "UPDATE events SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (body, prev, new, seq),
        )
        prev = new
    report = _since(signed, cp)
    assert [d.kind for d in report.defects] == [DefectKind.CHECKPOINT]
    assert report.first_bad_seq == cp.seq


def test_a_row_planted_after_the_checkpoint_is_found(signed: AuditStore, raw: Raw) -> None:
    cp = _verified(signed)
    seq, head = signed.head()
    body = event_body(
        seq=seq + 1, event_id="forged", request_id="forged", kind="request",
        recorded_at=datetime.now(UTC), task="t", caller="x", policy_fingerprint=None,
        request_hash=None, durability=signed.durability, data={}, payloads={}, policy_ref=None,
    )  # fmt: skip
    forged = base64.b64encode(b"\0" * 64).decode()
    raw.execute(
        "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, task, caller, body, "
        "prev_hash, hash, signature, key_id) VALUES (?, 'forged', 'forged', 'request', ?, 't', "
        "'x', ?, ?, ?, ?, ?)",
        (
            seq + 1,
            json.loads(body)["recorded_at"].replace("T", " ").rstrip("Z"),
            body,
            head,
            link_hash(head, body),
            forged,
            RECORD.key_id,
        ),
    )
    report = _since(signed, cp)
    assert [(d.seq, d.kind) for d in report.defects] == [(seq + 1, DefectKind.BAD_SIGNATURE)]


def test_an_edited_signature_column_before_the_checkpoint_is_found(
    signed: AuditStore, raw: Raw
) -> None:
    """The signature is outside the hash chain: only the attested digest of the signature
    columns can show it changed, since no signature before the seq is checked again."""
    cp = _verified(signed)
    raw.unguard()
    raw.execute(
        "UPDATE events SET signature = ? WHERE seq = 2", (base64.b64encode(b"\1" * 64).decode(),)
    )
    report = _since(signed, cp)
    assert [(d.seq, d.kind) for d in report.defects] == [(cp.seq, DefectKind.CHECKPOINT)]
    assert "signature or key_id column" in report.defects[0].detail
    full = verify_log(signed, trust=TRUST)  # a full verify names the event itself
    assert [(d.seq, d.kind) for d in full.defects] == [(2, DefectKind.BAD_SIGNATURE)]


def test_a_checkpoint_by_an_untrusted_key_is_refused(signed: AuditStore) -> None:
    cp = _verified(signed, key=OTHER)
    with pytest.raises(CheckpointError, match="not a key this verify trusts"):
        checkpoints.relied_on(cp, TRUST.keys, {checkpoints.public_key(KEY)})


def test_a_head_checkpoint_is_not_a_verified_one(signed: AuditStore) -> None:
    head = take_checkpoint(signed, KEY)
    with pytest.raises(CheckpointError, match="not a verified checkpoint"):
        checkpoints.relied_on(head, TRUST.keys, {checkpoints.public_key(KEY)})


def test_a_checkpoint_of_a_forked_log_is_refused(tmp_path: Path) -> None:
    """Two copies of one log (same store id) that went separate ways after seq 4: a verified
    checkpoint of one names a hash at its seq that the other does not hold."""
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    with AuditStore.open(f"sqlite:///{first}", signer=RECORD) as store:
        fill(store, requests=2)
    shutil.copy(first, second)
    with AuditStore.open(f"sqlite:///{first}", signer=RECORD) as a:
        _append_more(a, 2)
        cp = _verified(a)
    with AuditStore.open(f"sqlite:///{second}", signer=RECORD) as b:
        b.append(EventDraft(kind=EventKind.REQUEST, request_id="elsewhere", task="t"))
        _append_more(b, 1)
        assert b.store_id == cp.store_id and b.head()[0] == cp.seq
        report = _since(b, cp)
    assert [(d.seq, d.kind) for d in report.defects] == [(cp.seq, DefectKind.CHECKPOINT)]
    assert "forked" in report.defects[0].detail


def test_a_truncated_log_is_found_against_a_verified_checkpoint(
    signed: AuditStore, raw: Raw
) -> None:
    cp = _verified(signed)
    raw.unguard()
    raw.execute("DELETE FROM events WHERE seq >= ?", (cp.seq - 1,))
    report = _since(signed, cp)
    assert DefectKind.CHECKPOINT in {d.kind for d in report.defects}
    assert "truncation" in " ".join(d.detail for d in report.defects)


# -- checkpoints carry the tree ------------------------------------------------------------


def test_a_checkpoint_carries_the_signed_tree_root(signed: AuditStore) -> None:
    cp = checkpoints.loads(checkpoints.dumps(take_checkpoint(signed, KEY)))
    assert cp.version == 2 and cp.tree_size == cp.seq and cp.note is not None
    expected = tree_head(log_leaves(signed, cp.seq), cp.seq)
    assert cp.root == base64.b64encode(expected.root).decode()
    tree = TreeCheckpoint(
        origin=origin(cp.store_id), tree_size=cp.seq, root=cp.root,
        public_key=checkpoints.public_key(KEY), note=cp.note,
    )  # fmt: skip
    assert checked_checkpoint(tree, [checkpoints.public_key(KEY)]) == expected
    report = verify_log(signed, checkpoint=cp, trust=TRUST)
    assert report.ok and report.tree_root_checked


def test_a_signed_checkpoint_with_a_wrong_root_is_found(signed: AuditStore) -> None:
    seq, head = signed.head()
    wrong = checkpoints.sign(signed.store_id, seq, head, datetime.now(UTC), KEY, root=b"\7" * 32)
    report = verify_log(signed, checkpoint=checkpoints.loads(checkpoints.dumps(wrong)), trust=TRUST)
    assert [(d.seq, d.kind) for d in report.defects] == [(seq, DefectKind.CHECKPOINT)]
    assert "Merkle root" in report.defects[0].detail


def test_a_checkpoint_whose_note_was_swapped_is_refused(signed: AuditStore) -> None:
    cp = take_checkpoint(signed, KEY)
    other = take_checkpoint(signed, KEY)  # a later head, its own note
    forged = cp.model_copy(update={"note": other.note, "signature": None})
    resigned = forged.model_copy(
        update={
            "signature": Ed25519PrivateKey.from_private_bytes(KEY)
            .sign(canonical_bytes(forged.signed_fields()))
            .hex()
        }
    )
    with pytest.raises(CheckpointError, match="signed note"):
        checkpoints.loads(checkpoints.dumps(resigned))


def test_a_version_1_checkpoint_still_verifies(signed: AuditStore) -> None:
    seq, head = signed.head()
    old = checkpoints.sign(signed.store_id, seq, head, datetime.now(UTC), KEY)
    text = checkpoints.dumps(old)
    assert "root" not in json.loads(text)
    assert verify_log(signed, checkpoint=checkpoints.loads(text), trust=TRUST).ok


# -- the CLI ---------------------------------------------------------------------------------


def _run(url: str, *args: str, key: bytes = KEY) -> Result:
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_CHECKPOINT_KEY": key.hex()}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_cli_writes_and_uses_a_verified_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    assert _run(url, "db", "upgrade").exit_code == 0
    _run(url, "audit", "checkpoint", "-o", str(tmp_path / "head.json"))
    verified = tmp_path / "verified.json"
    first = _run(url, "audit", "verify", "--write-verified", str(verified))
    assert first.exit_code == 0, first.output
    assert "verified checkpoint at seq 1" in first.output
    _run(url, "audit", "checkpoint", "-o", str(tmp_path / "head2.json"))
    later = _run(url, "audit", "verify", "--since-verified", str(verified), "--format", "json")
    assert later.exit_code == 0, later.output
    report = json.loads(later.output)
    assert report["signatures_checked_from"] == 2
    assert report["signatures_attested"]["seq"] == 1
    text = _run(url, "audit", "verify", "--since-verified", str(verified)).output
    assert "those of seq 1..1 NOT checked again" in text
    refused = _run(url, "audit", "verify", "--since-verified", str(verified), key=OTHER)
    assert refused.exit_code == 2 and "not a key this verify trusts" in refused.output
    head = _run(url, "audit", "verify", "--since-verified", str(tmp_path / "head.json"))
    assert head.exit_code == 2 and "not a verified checkpoint" in head.output


def test_a_record_key_cannot_attest_a_verify(tmp_path: Path) -> None:
    """A record key's holder (a rotated-out key still trusted for old events, say) who can
    write the database must not vouch for the signatures a later verify skips: only the
    checkpoint key attests."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    assert _run(url, "db", "upgrade").exit_code == 0
    _run(url, "audit", "checkpoint", "-o", str(tmp_path / "head.json"))
    record_seed = (tmp_path / "gateway-record.key").read_text("utf-8").strip()
    by_record_key = tmp_path / "by-record-key.json"
    written = _run(
        url, "audit", "verify", "--write-verified", str(by_record_key),
        key=bytes.fromhex(Signer.from_text(record_seed).seed_hex()),
    )  # fmt: skip
    assert written.exit_code == 0, written.output
    refused = _run(url, "audit", "verify", "--since-verified", str(by_record_key))
    assert refused.exit_code == 2 and "not a key this verify trusts" in refused.output


def test_cli_says_before_walking_that_it_cannot_sign(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    assert _run(url, "db", "upgrade").exit_code == 0
    env = {"GATEWAY_DATABASE_URL": url}
    result = CliRunner().invoke(
        main, ["audit", "verify", "--write-verified", str(tmp_path / "v.json")], env=env
    )
    assert result.exit_code != 0 and "GATEWAY_CHECKPOINT_KEY" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "v.json").exists()


def test_verified_checkpoints_chain_each_resting_on_the_one_before(signed: AuditStore) -> None:
    first = _verified(signed)
    _append_more(signed)
    relied = checkpoints.relied_on(first, TRUST.keys, {checkpoints.public_key(KEY)})
    report = verify_log(signed, trust=TRUST, relied=relied, measure_head=True)
    assert report.ok and report.signatures_checked_from == first.seq + 1
    second = checkpoints.loads(
        checkpoints.dumps(verified_checkpoint(signed, report, KEY, rests_on=first))
    )
    assert second.verified is not None and second.verified.rests_on is not None
    assert (second.verified.rests_on.seq, second.verified.rests_on.hash) == (
        first.seq,
        first.hash,
    )
    _append_more(signed, 1)
    later = _since(signed, second)
    assert later.ok and later.signatures_checked_from == second.seq + 1


def test_a_key_withdrawn_since_the_checkpoint_fails_its_old_events(any_url: str) -> None:
    """Events signed by a key that the attesting verify trusted but this one does not: the
    checkpoint cannot stand for them (untrusted_signer), though their signatures are fine."""
    retired = Signer.from_text("43" * 32)
    with AuditStore.open(any_url, signer=retired) as old:
        old.append(EventDraft(kind=EventKind.REQUEST, request_id="old", task="t"))
    both = Trust(TrustedKeys.of([RECORD.public_key, retired.public_key]))
    with AuditStore.open(any_url, signer=RECORD) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="new", task="t"))
        report = verify_log(store, trust=both, measure_head=True)
        assert report.ok, report.defects
        cp = checkpoints.loads(checkpoints.dumps(verified_checkpoint(store, report, KEY)))
        pins = {checkpoints.public_key(KEY)}
        assert verify_log(store, trust=both, relied=checkpoints.relied_on(cp, both.keys, pins)).ok
        now = verify_log(store, trust=TRUST, relied=checkpoints.relied_on(cp, TRUST.keys, pins))
    assert [(d.seq, d.kind) for d in now.defects] == [(1, DefectKind.UNTRUSTED_SIGNER)]
