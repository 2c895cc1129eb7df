"""Witness cosignatures (C2SP tlog-cosignature v1): made, checked, required; a witness that
refuses forks, rollbacks and lying databases; the commands end to end.

The vkey and the cosignature time are transparency-dev/formats' vectors (note/
note_cosigv1_test.go, TestCoSigV1NewVerifier and TestCosignatureTimestamp; Apache-2.0).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import AuditStore
from audit.proofs.checkpoint import public_key
from audit.proofs.cosignature import (
    Witness,
    WitnessError,
    add_cosignature,
    check_cosignatures,
    cosigner_key_id,
    public_of,
    timestamp_of,
)
from audit.proofs.merkle import TreeHead, consistency_proof, leaf_hash, tree_head
from audit.proofs.receipt_checks import check_consistency, check_receipt
from audit.proofs.receipts import (
    dumps,
    load_checkpoint,
    load_receipt,
    make_receipt,
    open_note,
    rebuild_tree,
    sign_checkpoint,
    signed_head,
    stored_consistency_proof,
)
from audit.proofs.witness import CosignResult, WitnessState, cosign
from gateway.cli import main
from tests.audit.conftest import RECORD, Raw, fill

LOG_KEY = bytes.fromhex("11" * 32)
LOG_PUBLIC = public_key(LOG_KEY)
W1 = bytes.fromhex("33" * 32)
W2 = bytes.fromhex("44" * 32)
NAME = "witness.bank.example/w1"
W1_SPEC = f"{NAME}={public_of(W1).hex()}"
NOW = 1_796_000_000

REMORA = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
TIMESTAMPED = (
    "ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFi"
    "EBYJXORmnFBOBA=="
)


def test_the_reference_vkey_and_cosignature_layout() -> None:
    witness = Witness.parse(REMORA)
    assert witness.name == "remora.n621.de"
    assert cosigner_key_id(witness.name, witness.public_raw).hex() == "da77ade7"
    assert timestamp_of(base64.b64decode(TIMESTAMPED)) == 1727964367
    with pytest.raises(WitnessError, match="key ID that is not its key's"):
        Witness.parse(REMORA.replace("da77ade7", "00000000"))
    with pytest.raises(WitnessError, match="neither NAME=KEY nor a witness vkey"):
        Witness.parse("TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6")  # type 0x01
    with pytest.raises(WitnessError, match="not a 32-byte Ed25519 public key"):
        Witness.parse(f"{NAME}=abcd")


def test_a_cosignature_checks_out_and_leaves_the_log_signature_intact(
    store: AuditStore,
) -> None:
    fill(store, requests=2)
    cp = signed_head(store, LOG_KEY)
    note = add_cosignature(cp.note, NAME, W1, NOW)
    assert note.startswith(cp.note) and note.count("\n\u2014 ") == 1 + 1
    [check] = check_cosignatures(note, [Witness.parse(W1_SPEC)])
    assert check.ok and check.cosigned_at == NOW
    assert (
        open_note(note, cp.origin, [bytes.fromhex(LOG_PUBLIC)])[0]
        == cp.note.split("\n\n")[0] + "\n"
    )
    again = add_cosignature(note, NAME, W1, NOW + 60)  # the same witness replaces its line
    assert again.count(f"\u2014 {NAME} ") == 1
    assert check_cosignatures(again, [Witness.parse(W1_SPEC)])[0].cosigned_at == NOW + 60

    other = Witness(NAME, public_of(W2))
    assert "no cosignature" in (check_cosignatures(note, [other])[0].problem or "")
    altered = note.replace(f"\n{cp.tree_size}\n", f"\n{cp.tree_size + 1}\n", 1)
    assert "does not match the checkpoint" in (
        check_cosignatures(altered, [Witness.parse(W1_SPEC)])[0].problem or ""
    )


def test_a_junk_line_under_the_witness_name_does_not_hide_its_cosignature(
    store: AuditStore,
) -> None:
    fill(store, requests=2)
    cp = signed_head(store, LOG_KEY)
    note = add_cosignature(cp.note, NAME, W1, NOW)
    real = next(line for line in note.splitlines() if line.startswith(f"\u2014 {NAME} "))
    blob = base64.b64decode(real.split(" ")[2])
    junk = base64.b64encode(blob[:4] + bytes(72)).decode()  # same key id, no signature
    planted = note.replace(real, f"\u2014 {NAME} {junk}\n{real}", 1)
    [check] = check_cosignatures(planted, [Witness.parse(W1_SPEC)])
    assert check.ok and check.cosigned_at == NOW
    [alone] = check_cosignatures(planted.replace(f"{real}\n", ""), [Witness.parse(W1_SPEC)])
    assert not alone.ok


# -- the witness decides -----------------------------------------------------------------------


def _cosign(store: AuditStore, cp_state: WitnessState, now: int = NOW) -> CosignResult:
    cp = signed_head(store, LOG_KEY)
    return cosign(
        cp, W1, NAME, [LOG_PUBLIC], cp_state,
        lambda m, n: stored_consistency_proof(store, m, n), now,
    )  # fmt: skip


def test_a_witness_cosigns_extensions_and_refuses_a_fork_and_a_rollback(
    store: AuditStore, raw: Raw
) -> None:
    fill(store, requests=3)
    first = _cosign(store, WitnessState.new(NAME, W1))
    assert first.refused is None and first.previous is None
    fill(store, requests=2)
    second = _cosign(store, first.state)
    assert second.refused is None and second.previous is not None
    assert (
        second.previous.tree_size == 6
        and second.state.logs[second.checkpoint.origin].tree_size == 10
    )
    assert check_cosignatures(second.checkpoint.note, [Witness.parse(W1_SPEC)])[0].ok
    same = _cosign(store, second.state)  # nothing new: cosigned again, later
    assert same.refused is None

    # the owner rewrites event 2 and recomputes the stored tree: a forked history
    raw.unguard()
    raw.execute("UPDATE events SET hash = ? WHERE seq = 2", ("sha256:" + "ab" * 32,))
    rebuild_tree(store)
    forked = _cosign(store, second.state)
    assert forked.refused is not None and "the log forked" in forked.refused
    fill(store, requests=1)
    forked_later = _cosign(store, second.state)
    assert forked_later.refused is not None
    assert (
        "does not extend the tree of 10 this witness last cosigned: a fork" in forked_later.refused
    )

    # a checkpoint older than the one cosigned: rolled back
    rollback = cosign(first.checkpoint, W1, NAME, [LOG_PUBLIC], second.state, lambda m, n: [], NOW)
    assert rollback.refused is not None and "the log shrank" in rollback.refused


def test_a_fork_under_a_new_origin_is_refused(store: AuditStore, raw: Raw) -> None:
    """The witness keeps one history per origin; the log key's holder must not escape it by
    signing a forked tree under an origin the witness has not seen."""
    fill(store, requests=3)
    first = _cosign(store, WitnessState.new(NAME, W1))
    assert first.refused is None
    forked = TreeHead(size=first.checkpoint.tree_size, root=b"\x07" * 32)
    elsewhere = sign_checkpoint(store.store_id + "-x", forked, LOG_KEY)
    assert elsewhere.origin != first.checkpoint.origin
    refused = cosign(elsewhere, W1, NAME, [LOG_PUBLIC], first.state, lambda m, n: [], NOW)
    assert refused.refused is not None and "second history of the same log" in refused.refused
    # another log, with its own key, is witnessed from its first tree
    other_key = bytes.fromhex("55" * 32)
    other = sign_checkpoint(store.store_id + "-y", forked, other_key)
    fresh = cosign(other, W1, NAME, [public_key(other_key)], first.state, lambda m, n: [], NOW)
    assert fresh.refused is None


def test_a_witness_refuses_a_foreign_signer_and_a_lying_proof(store: AuditStore) -> None:
    fill(store, requests=2)
    state = WitnessState.new(NAME, W1)
    foreign = cosign(signed_head(store, W2), W1, NAME, [LOG_PUBLIC], state, lambda m, n: [], NOW)
    assert foreign.refused is not None and "log signature does not check out" in foreign.refused
    first = _cosign(store, state)
    fill(store, requests=1)
    cp = signed_head(store, LOG_KEY)
    lie = cosign(cp, W1, NAME, [LOG_PUBLIC], first.state, lambda m, n: [b"\0" * 32] * 3, NOW)
    assert lie.refused is not None and "a fork" in lie.refused
    with pytest.raises(WitnessError, match="not this witness key's"):
        cosign(cp, W2, NAME, [LOG_PUBLIC], first.state, lambda m, n: [], NOW)


def test_required_witnesses_are_checked_on_receipts_and_consistency(store: AuditStore) -> None:
    fill(store, requests=3)
    receipt = make_receipt(store, "req-1", LOG_KEY)
    w1 = Witness.parse(W1_SPEC)
    unsigned = check_receipt(dumps(receipt), [LOG_PUBLIC], [w1])
    assert (
        not unsigned.ok
        and "checkpoint: witness witness.bank.example/w1: no cosignature" in (unsigned.problems[0])
    )
    assert check_receipt(dumps(receipt), [LOG_PUBLIC]).ok  # none required: as before
    cp = receipt.checkpoint
    cosigned = receipt.model_copy(
        update={
            "checkpoint": cp.model_copy(update={"note": add_cosignature(cp.note, NAME, W1, NOW)})
        }
    )
    report = check_receipt(dumps(cosigned), [LOG_PUBLIC], [w1])
    assert report.ok, report.problems
    assert [(w.name, w.ok, w.cosigned_at) for w in report.witnesses] == [(NAME, True, NOW)]
    two = check_receipt(dumps(cosigned), [LOG_PUBLIC], [w1, Witness("w2.example", public_of(W2))])
    assert not two.ok and len(two.problems) == 1 and "w2.example" in two.problems[0]

    old = dumps(cosigned)
    fill(store, requests=1)
    new = dumps(signed_head(store, LOG_KEY))
    consistency = check_consistency(store, old, new, [LOG_PUBLIC], [w1])
    assert not consistency.ok and consistency.problems[0].startswith("NEW: witness")
    assert consistency.old_witnesses[0].ok


# -- the commands ------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url, signer=RECORD) as store:
        fill(store, requests=3)
    return url


def run(url: str, *args: str) -> Result:
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_CHECKPOINT_KEY": LOG_KEY.hex(),
        "GATEWAY_WITNESS_KEY": W1.hex(),
        "GATEWAY_TRUSTED_KEYS": RECORD.public_key,
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def witness_args(path: Path, state: Path) -> list[str]:
    return ["audit", "witness", str(path), "--name", NAME, "--state", str(state),
            "--log-key", LOG_PUBLIC]  # fmt: skip


def test_witness_command_cosigns_a_receipt_and_check_receipt_requires_it(
    db: str, tmp_path: Path
) -> None:
    receipt, state = tmp_path / "receipt.json", tmp_path / "w1-state.json"
    assert run(db, "audit", "prove", "req-1", "-o", str(receipt)).exit_code == 0
    bare = run(db, "audit", "check-receipt", str(receipt), "--public-key", LOG_PUBLIC,
               "--witness-key", W1_SPEC)  # fmt: skip
    assert bare.exit_code == 1 and "no cosignature by witness" in bare.output

    done = run(db, *witness_args(receipt, state))
    assert done.exit_code == 0, done.output
    assert "the first tree of this log this witness cosigns: nothing earlier" in done.output
    assert f"--witness-key {W1_SPEC}" in done.output
    assert json.loads(state.read_text())["logs"]
    load_receipt(receipt.read_text())  # still a receipt, now cosigned
    checked = run(db, "audit", "check-receipt", str(receipt), "--public-key", LOG_PUBLIC,
                  "--witness-key", W1_SPEC)  # fmt: skip
    assert checked.exit_code == 0, checked.output
    assert f"cosigned by witness {NAME} at " in checked.output


def test_witness_command_refuses_a_fork_and_writes_nothing(db: str, tmp_path: Path) -> None:
    old, new, state = tmp_path / "old.json", tmp_path / "new.json", tmp_path / "w1.json"
    assert run(db, "audit", "tree-head", "-o", str(old)).exit_code == 0
    assert run(db, *witness_args(old, state)).exit_code == 0
    raw = Raw(db)
    raw.unguard()
    raw.execute("UPDATE events SET hash = ? WHERE seq = 3", ("sha256:" + "cd" * 32,))
    raw.close()
    with AuditStore.open(db, signer=RECORD) as store:
        fill(store, requests=1)
        # `tree-head` refuses to sign over the rewritten event: the operator who forks the
        # log signs its head with the library instead.
        rebuild_tree(store)
        new.write_text(dumps(signed_head(store, LOG_KEY)))
    before = (new.read_text(), state.read_text())
    refused = run(db, *witness_args(new, state))
    assert refused.exit_code == 1
    assert refused.output.startswith("WITNESS REFUSED the tree of 8 events")
    assert "a fork" in refused.output
    assert (new.read_text(), state.read_text()) == before

    with AuditStore.open(db, signer=RECORD) as store:  # verify --from/--to names the witness
        fill(store, requests=1)
        newer = tmp_path / "newer.json"
        newer.write_text(dumps(signed_head(store, LOG_KEY)))
    checked = run(db, "audit", "verify", "--from", str(old), "--to", str(newer),
                  "--witness-key", W1_SPEC, "--format", "json")  # fmt: skip
    report = json.loads(checked.output)
    assert checked.exit_code == 1 and report["old_witnesses"][0]["ok"] is True
    assert any("NEW: witness" in p for p in report["problems"])
    lone = run(db, "audit", "verify", "--witness-key", W1_SPEC)
    assert lone.exit_code == 2 and "--witness-key and --tsa-cert go with --from" in lone.output


def test_witness_command_names_a_bad_key_and_a_bad_state(db: str, tmp_path: Path) -> None:
    head, state = tmp_path / "head.json", tmp_path / "state.json"
    assert run(db, "audit", "tree-head", "-o", str(head)).exit_code == 0
    bad = run(db, *witness_args(head, state), "--key", "not-a-key")
    assert bad.exit_code == 2 and "witness key is not 64 hex characters" in bad.output
    unusable = run(db, "audit", "witness", str(head), "--name", NAME, "--state", str(state),
                   "--log-key", "00")  # fmt: skip
    assert unusable.exit_code == 2 and "trusted public key is not usable" in unusable.output
    assert not state.exists()
    as_json = json.loads(run(db, *witness_args(head, state), "--format", "json").output)
    assert as_json["refused"] is None and as_json["vkey"].startswith(f"{NAME}+")
    state.write_text("{}")
    broken = run(db, *witness_args(head, state))
    assert broken.exit_code == 2 and "witness state file is not one" in broken.output


def test_a_witness_without_the_database_uses_the_proof_the_head_carries(
    db: str, tmp_path: Path
) -> None:
    old, new, bare = tmp_path / "old.json", tmp_path / "new.json", tmp_path / "bare.json"
    state = tmp_path / "w1.json"
    assert run(db, "audit", "tree-head", "-o", str(old)).exit_code == 0
    assert run(db, *witness_args(old, state)).exit_code == 0
    with AuditStore.open(db, signer=RECORD) as store:
        fill(store, requests=2)
    made = run(db, "audit", "tree-head", "--proof-from", str(old), "-o", str(new))
    assert made.exit_code == 0, made.output
    assert load_checkpoint(new.read_text()).consistency is not None
    assert run(db, "audit", "tree-head", "-o", str(bare)).exit_code == 0

    elsewhere = f"sqlite:///{tmp_path / 'no-such.db'}"  # the witness's machine: no log
    cosigned = run(elsewhere, *witness_args(new, state))
    assert cosigned.exit_code == 0, cosigned.output
    assert "it extends the tree of 6 events this witness cosigned before" in cosigned.output
    stuck = run(elsewhere, *witness_args(bare, state))  # same tree, nothing to prove: fine
    assert stuck.exit_code == 0
    with AuditStore.open(db, signer=RECORD) as store:
        fill(store, requests=1)
    assert run(db, "audit", "tree-head", "-o", str(bare)).exit_code == 0
    unproven = run(elsewhere, *witness_args(bare, state))
    assert unproven.exit_code == 2
    assert "carries no consistency proof from size 10" in unproven.output
    assert not (tmp_path / "no-such.db").exists()


def test_the_signer_refuses_a_head_that_does_not_extend_the_earlier_one(
    db: str, tmp_path: Path
) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    assert run(db, "audit", "tree-head", "-o", str(old)).exit_code == 0  # 6 events stored
    raw = Raw(db)  # the stored right edge of 6 leaves is [0, 4) and [4, 6): alter [4, 6)
    raw.execute(
        "UPDATE merkle_nodes SET hash = ? WHERE level = 1 AND node_index = 2", (b"\1" * 32,)
    )
    raw.close()
    with AuditStore.open(db, signer=RECORD) as store:
        fill(store, requests=1)
    refused = run(db, "audit", "tree-head", "--proof-from", str(old), "-o", str(new))
    assert refused.exit_code == 2
    assert "does not extend the earlier head of 6" in refused.output
    assert "nothing was signed" in refused.output and not new.exists()
    # unanchored, the signer would sign the altered tree; the log itself shows it up
    assert run(db, "audit", "tree-head", "-o", str(new)).exit_code == 0
    caught = run(db, "audit", "verify", "--from", str(old), "--to", str(new))
    assert caught.exit_code == 1 and "no longer the tree NEW signed" in caught.output
    assert run(db, "audit", "tree-head", "--rebuild", "--proof-from", str(old)).exit_code == 0


@pytest.mark.slow  # witness processes
def test_witness_runs_on_one_state_file_wait_for_each_other(db: str, tmp_path: Path) -> None:
    import fcntl
    import os
    import subprocess
    import sys

    head, state = tmp_path / "head.json", tmp_path / "w1.json"
    assert run(db, "audit", "tree-head", "-o", str(head)).exit_code == 0
    env = {**os.environ, "GATEWAY_DATABASE_URL": db, "GATEWAY_WITNESS_KEY": W1.hex()}
    with open(tmp_path / ".w1.json.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another run holds the state
        waiting = subprocess.Popen(
            [sys.executable, "-m", "gateway", *witness_args(head, state)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.wait(timeout=10)  # far longer than a run takes
        assert not state.exists()
    out, _ = waiting.communicate(timeout=120)  # released: it goes on
    assert waiting.returncode == 0, out
    assert state.exists()


# -- a property: whatever a log shows it, a witness never cosigns two forks ----------------------


@settings(max_examples=60, deadline=None)
@given(
    forks=st.lists(st.integers(1, 40), min_size=1, max_size=3),
    shown=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 60)), min_size=1, max_size=12),
)
def test_a_witness_never_cosigns_two_trees_that_do_not_extend_each_other(
    forks: list[int], shown: list[tuple[int, int]]
) -> None:
    """Versions of one log: version 0, and forks of it that differ from leaf ``f`` on. The
    log shows the witness heads of any version and size, with honest proofs for that
    version; every pair of heads the witness cosigned must be prefixes of one another."""
    base = [leaf_hash(b"v0 %d" % i) for i in range(60)]
    versions = [base] + [
        base[:f] + [leaf_hash(b"v%d %d" % (v, i)) for i in range(f, 60)]
        for v, f in enumerate(forks, start=1)
    ]
    state = WitnessState.new(NAME, W1)
    cosigned: list[tuple[int, int]] = []
    for version, size in shown:
        leaves = versions[version % len(versions)]
        cp = sign_checkpoint("log-1", tree_head(leaves, size), LOG_KEY)
        result = cosign(
            cp, W1, NAME, [LOG_PUBLIC], state,
            lambda m, n, leaves=leaves: consistency_proof(leaves, m, n), NOW,
        )  # fmt: skip
        if result.refused is None:
            state = result.state
            cosigned.append((version % len(versions), size))
    for a, (va, na) in enumerate(cosigned):
        for vb, nb in cosigned[a + 1 :]:
            m = min(na, nb)
            assert versions[va][:m] == versions[vb][:m], (cosigned, forks)
