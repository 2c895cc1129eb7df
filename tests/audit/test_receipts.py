"""Receipts and tree checkpoints: C2SP signed notes, a receipt checked offline in another
process with only the public key, tampered receipts refused, forks and truncation refused.

The signed-note vector is golang.org/x/mod/sumdb/note's (note_test.go, the PeterNeumann key
and note; BSD-3-Clause), the reference implementation of c2sp.org/signed-note.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore
from audit.proofs.checkpoint import public_key
from audit.proofs.merkle import ProofError, event_leaf, tree_head
from audit.proofs.receipt_checks import check_consistency, check_receipt
from audit.proofs.receipts import (
    dumps,
    make_receipt,
    note_key_id,
    open_note,
    origin,
    sign_note,
    signed_head,
    verifier_key,
)
from gateway.cli import main
from tests.audit.conftest import RECORD, Raw, fill

KEY = bytes.fromhex("11" * 32)
PUBLIC = public_key(KEY)
OTHER = bytes.fromhex("22" * 32)

# golang.org/x/mod/sumdb/note, note_test.go
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT
    + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXg"
    "KvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def go_keys() -> tuple[bytes, bytes]:
    seed = base64.b64decode(GO_SKEY.split("+", 4)[4])
    public = base64.b64decode(GO_VKEY.split("+", 2)[2])
    assert seed[0] == public[0] == 1  # the Ed25519 signature type
    return seed[1:], public[1:]


# -- signed notes ------------------------------------------------------------------------------


def test_a_note_signed_with_the_reference_key_is_the_reference_note_byte_for_byte() -> None:
    seed, public = go_keys()
    assert note_key_id("PeterNeumann", public).hex() == "c74f20a3"
    assert verifier_key("PeterNeumann", public) == GO_VKEY
    assert sign_note(GO_TEXT, "PeterNeumann", seed) == GO_NOTE
    assert open_note(GO_NOTE, "PeterNeumann", [public]) == (GO_TEXT, public)


def test_an_altered_or_foreign_note_is_refused() -> None:
    _, public = go_keys()
    with pytest.raises(ProofError, match="does not match its text"):
        open_note(GO_NOTE.replace("answer", "Answer"), "PeterNeumann", [public])
    other = bytes.fromhex(PUBLIC)
    with pytest.raises(ProofError, match="no trusted key"):
        open_note(GO_NOTE, "PeterNeumann", [other])
    with pytest.raises(ProofError, match="no trusted key"):
        open_note(GO_NOTE, "SomeoneElse", [public])
    with pytest.raises(ProofError, match="malformed"):
        open_note(GO_NOTE.replace("\u2014", "--"), "PeterNeumann", [public])
    with pytest.raises(ProofError, match="not a signed note"):
        open_note(GO_TEXT, "PeterNeumann", [public])


# -- receipts, in the library ------------------------------------------------------------------


def test_a_receipt_proves_every_event_of_a_request_against_the_signed_head(
    store: AuditStore,
) -> None:
    fill(store, requests=5)
    receipt = make_receipt(store, "req-2", KEY)
    events = store.events_for_request("req-2")
    assert [e.seq for e in receipt.events] == [e.seq for e in events]
    leaves = [event_leaf(e.hash) for e in store.iter_events()]
    assert receipt.checkpoint.head == tree_head(leaves)
    assert receipt.checkpoint.note.startswith(f"{origin(store.store_id)}\n{len(leaves)}\n")
    report = check_receipt(dumps(receipt), [PUBLIC])
    assert report.ok, report.problems
    assert report.events_checked == len(events) and report.tree_size == len(leaves)


def tampered(text: str, change: Any) -> str:
    value = json.loads(text)
    change(value)
    return json.dumps(value)


def flip_b64(text: str, at: int = 3) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[at] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def _set_root(v: dict[str, Any]) -> None:
    cp = v["checkpoint"]
    new_root = flip_b64(cp["root"])
    cp["note"] = cp["note"].replace(cp["root"], new_root)
    cp["root"] = new_root


def _set_size(v: dict[str, Any]) -> None:
    cp = v["checkpoint"]
    size = cp["tree_size"]
    cp["note"] = cp["note"].replace(f"\n{size}\n", f"\n{size + 1}\n", 1)
    cp["tree_size"] = size + 1


def _flip_signature(v: dict[str, Any]) -> None:
    cp = v["checkpoint"]
    text, line = cp["note"].rsplit("\n\n", 1)
    dash, name, sig = line.rstrip("\n").split(" ")
    cp["note"] = f"{text}\n\n{dash} {name} {flip_b64(sig, 20)}\n"  # past the key ID


def _edit_body(v: dict[str, Any]) -> None:
    v["events"][0]["body"] = v["events"][0]["body"].replace(
        '"caller":"payments-svc"', '"caller":"x"'
    )


def _edit_body_and_hash(v: dict[str, Any]) -> None:
    from audit.store.chain import link_hash

    event = v["events"][0]
    event["body"] = event["body"].replace('"caller":"payments-svc"', '"caller":"x"')
    event["hash"] = link_hash(event["prev_hash"], event["body"].encode())


def _flip_proof_node(v: dict[str, Any]) -> None:
    v["events"][1]["inclusion_proof"][0] = flip_b64(v["events"][1]["inclusion_proof"][0])


def _drop_proof_node(v: dict[str, Any]) -> None:
    v["events"][1]["inclusion_proof"].pop()


def _move_event(v: dict[str, Any]) -> None:
    v["events"][0]["seq"] += 1


TAMPERINGS = {
    "event body": (_edit_body, "body or prev_hash was altered"),
    "event body and its hash": (_edit_body_and_hash, "inclusion proof is refused"),
    "proof node": (_flip_proof_node, "inclusion proof is refused"),
    "missing proof node": (_drop_proof_node, "fewer than"),
    "seq": (_move_event, "not the body of this seq"),
    "root, in the file only": (
        lambda v: v["checkpoint"].update(root=flip_b64(v["checkpoint"]["root"])),
        "differs from its signed note",
    ),
    "root, in the note too": (_set_root, "signature does not match its text"),
    "tree size": (_set_size, "signature does not match its text"),
    "signature": (_flip_signature, "signature does not match its text"),
}


@pytest.mark.parametrize("what", TAMPERINGS)
def test_a_tampered_receipt_is_refused_with_the_reason(store: AuditStore, what: str) -> None:
    fill(store, requests=6)
    text = dumps(make_receipt(store, "req-3", KEY))
    change, reason = TAMPERINGS[what]
    report = check_receipt(tampered(text, change), [PUBLIC])
    assert not report.ok
    assert any(reason in p for p in report.problems), report.problems


def test_a_receipt_signed_by_another_key_is_refused(store: AuditStore) -> None:
    fill(store, requests=2)
    report = check_receipt(dumps(make_receipt(store, "req-1", OTHER)), [PUBLIC])
    assert not report.ok and "signed by no trusted key" in report.problems[0]


def test_a_receipt_naming_another_trusted_key_as_its_signer_is_refused(
    store: AuditStore,
) -> None:
    # Both keys are trusted, so the note still opens; the report would name the wrong signer.
    fill(store, requests=2)
    text = tampered(
        dumps(make_receipt(store, "req-1", KEY)),
        lambda v: v["checkpoint"].update(public_key=public_key(OTHER)),
    )
    report = check_receipt(text, [PUBLIC, public_key(OTHER)])
    assert not report.ok
    assert any("is not the key that signed its note" in p for p in report.problems)


# -- consistency: extension, fork, truncation --------------------------------------------------


def test_a_later_head_extends_an_earlier_one(store: AuditStore) -> None:
    fill(store, requests=3)
    old = dumps(signed_head(store, KEY))
    fill(store, requests=4)
    new = dumps(signed_head(store, KEY))
    report = check_consistency(store, old, new, [PUBLIC])
    assert report.ok, report.problems
    assert report.proof and report.old_size < report.new_size == report.log_size
    assert check_consistency(store, old, old, [PUBLIC]).ok
    receipt = dumps(make_receipt(store, "req-0", KEY))  # a receipt carries a checkpoint too
    assert check_consistency(store, old, receipt, [PUBLIC]).ok


def test_a_forked_log_is_refused(store: AuditStore, raw: Raw) -> None:
    fill(store, requests=3)
    old = dumps(signed_head(store, KEY))
    raw.unguard()  # the owner rewrites event 2, then the log grows and is signed again
    raw.execute("UPDATE events SET hash = ? WHERE seq = 2", ("sha256:" + "ab" * 32,))
    fill(store, requests=1)
    new = dumps(signed_head(store, KEY))
    report = check_consistency(store, old, new, [PUBLIC])
    assert not report.ok
    text = " ".join(report.problems)
    assert "NEW does not extend OLD" in text and "forked" in text


def test_a_truncated_log_is_refused(store: AuditStore, raw: Raw) -> None:
    fill(store, requests=3)
    old = dumps(signed_head(store, KEY))
    fill(store, requests=2)
    new = dumps(signed_head(store, KEY))
    raw.unguard()
    raw.execute("DELETE FROM events WHERE seq > 4")
    report = check_consistency(store, old, new, [PUBLIC])
    assert not report.ok and "events were removed" in report.problems[0]
    swapped = check_consistency(store, new, old, [PUBLIC])
    assert not swapped.ok and "shrank" in swapped.problems[0]


def test_checkpoints_by_an_untrusted_key_or_of_another_log_are_refused(
    store: AuditStore, tmp_path: Path
) -> None:
    fill(store, requests=2)
    old = dumps(signed_head(store, OTHER))
    new = dumps(signed_head(store, KEY))
    report = check_consistency(store, old, new, [PUBLIC])
    assert not report.ok and report.problems[0].startswith("OLD: ")
    with AuditStore.open(f"sqlite:///{tmp_path / 'other.db'}") as other:
        fill(other, requests=2)
        foreign = dumps(signed_head(other, KEY))
    report = check_consistency(store, foreign, foreign, [PUBLIC])
    assert not report.ok and "not this one" in report.problems[0]


# -- the command line: one process proves, another checks with only the public key ------------


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url, signer=RECORD) as store:
        fill(store, requests=5)
    return url


def run(url: str, *args: str) -> Result:
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_CHECKPOINT_KEY": KEY.hex(),
        "GATEWAY_TRUSTED_KEYS": RECORD.public_key,
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def check_elsewhere(receipt: Path, *keys: str) -> subprocess.CompletedProcess[str]:
    """`check-receipt` in a fresh interpreter that has no database and no private key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env["GATEWAY_DATABASE_URL"] = f"sqlite:///{receipt.parent / 'no-such.db'}"
    args = [sys.executable, "-m", "gateway", "audit", "check-receipt", str(receipt)]
    for key in keys:
        args += ["--public-key", key]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow  # the CLI as another process
def test_a_receipt_made_by_one_process_checks_out_in_another_with_only_the_public_key(
    db: str, tmp_path: Path
) -> None:
    receipt = tmp_path / "receipt.json"
    made = run(db, "audit", "prove", "req-1", "-o", str(receipt))
    assert made.exit_code == 0, made.output
    assert "event(s) proven" in made.output
    checked = check_elsewhere(receipt, PUBLIC)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "receipt checks out: request req-1" in checked.stdout
    assert not (tmp_path / "no-such.db").exists()

    receipt.write_text(tampered(receipt.read_text(), _edit_body))
    refused = check_elsewhere(receipt, PUBLIC)
    assert refused.returncode == 1 and "RECEIPT REFUSED" in refused.stdout
    assert "body or prev_hash was altered" in refused.stdout


def test_check_receipt_takes_a_key_file_and_refuses_other_keys(db: str, tmp_path: Path) -> None:
    receipt = tmp_path / "receipt.json"
    assert run(db, "audit", "prove", "req-0", "-o", str(receipt)).exit_code == 0
    keys = tmp_path / "keys.txt"
    keys.write_text(f"# checkpoint key\n{PUBLIC}\n")
    ok = run(db, "audit", "check-receipt", str(receipt), "--public-key", str(keys))
    assert ok.exit_code == 0, ok.output
    wrong = run(db, "audit", "check-receipt", str(receipt), "--public-key", public_key(OTHER))
    assert wrong.exit_code == 1 and "signed by no trusted key" in wrong.output
    as_json = run(
        db, "audit", "check-receipt", str(receipt), "--public-key", PUBLIC, "--format", "json"
    )
    assert json.loads(as_json.output)["ok"] is True


def test_prove_names_an_unknown_request_and_a_missing_key(db: str, tmp_path: Path) -> None:
    unknown = run(db, "audit", "prove", "no-such-request")
    assert unknown.exit_code == 2 and "no request 'no-such-request'" in unknown.output
    env = {"GATEWAY_DATABASE_URL": db, "GATEWAY_CHECKPOINT_KEY": ""}
    keyless = CliRunner().invoke(main, ["audit", "prove", "req-0"], env=env)
    assert keyless.exit_code == 2 and "no checkpoint signing key" in keyless.output


def test_verify_from_to_accepts_an_extension_and_refuses_truncation(
    db: str, tmp_path: Path
) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    assert run(db, "audit", "tree-head", "-o", str(old)).exit_code == 0
    with AuditStore.open(db, signer=RECORD) as store:
        fill(store, requests=2)
    assert run(db, "audit", "tree-head", "-o", str(new)).exit_code == 0
    ok = run(db, "audit", "verify", "--from", str(old), "--to", str(new))
    assert ok.exit_code == 0 and "consistent: the tree of" in ok.output
    plain = run(db, "audit", "verify")  # without them, verify is the chain's, unchanged
    assert "events" in plain.output and "consistent" not in plain.output
    raw = Raw(db)
    raw.unguard()
    raw.execute("DELETE FROM events WHERE seq > 12")
    raw.close()
    cut = run(db, "audit", "verify", "--from", str(old), "--to", str(new), "--format", "json")
    assert cut.exit_code == 1
    assert "truncation or rollback" in json.loads(cut.output)["problems"][0]
    alone = run(db, "audit", "verify", "--from", str(old))
    assert alone.exit_code == 2 and "--from and --to go together" in alone.output


def test_verify_from_to_does_not_take_a_record_key_as_a_tree_signer(
    db: str, tmp_path: Path
) -> None:
    """A record key's holder (trusted for the events it signed) who can write the database
    could rewrite the log and sign both heads: only --public-key and the checkpoint key
    sign tree heads."""
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    env = {
        "GATEWAY_DATABASE_URL": db,
        "GATEWAY_CHECKPOINT_KEY": OTHER.hex(),
        "GATEWAY_TRUSTED_KEYS": RECORD.public_key,
    }
    for path in (old, new):
        made = CliRunner().invoke(main, ["audit", "tree-head", "-o", str(path)], env=env)
        assert made.exit_code == 0, made.output
    env = {"GATEWAY_DATABASE_URL": db, "GATEWAY_TRUSTED_KEYS": public_key(OTHER)}
    refused = CliRunner().invoke(main, ["audit", "verify", "--from", str(old), "--to", str(new)],
                                 env=env)  # fmt: skip
    assert refused.exit_code != 0
    assert "consistent: the tree of" not in refused.output
    keys = tmp_path / "tree-signer.txt"
    keys.write_text(public_key(OTHER) + "\n")
    allowed = run(db, "audit", "verify", "--from", str(old), "--to", str(new),
                  "--public-key", str(keys))  # fmt: skip
    assert allowed.exit_code == 0, allowed.output
