"""RFC 3161 time-stamps on tree checkpoints, from a local `openssl ts` TSA on 127.0.0.1:
asked for, kept, checked; a token over other bytes and a token from an untrusted TSA are
refused; a later cosignature leaves the token valid."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from cryptography import x509

from audit import AuditStore
from audit.proofs.checkpoint import public_key
from audit.proofs.cosignature import add_cosignature, public_of
from audit.proofs.receipt_checks import check_receipt
from audit.proofs.receipts import dumps, load_checkpoint, make_receipt, signed_head
from audit.proofs.timestamp import (
    TimeStampError,
    accept_response,
    check_time_stamps,
    note_text,
    time_stamp_query,
)
from gateway.cli import main
from tests.audit.conftest import RECORD, fill
from tests.support.tsa import LocalTSA, local_tsa

KEY = bytes.fromhex("11" * 32)
PUBLIC = public_key(KEY)


@pytest.fixture(scope="module")
def tsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTSA]:
    with local_tsa(tmp_path_factory.mktemp("tsa"), "Bank TSA") as running:
        yield running


@pytest.fixture(scope="module")
def rogue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTSA]:
    with local_tsa(tmp_path_factory.mktemp("rogue"), "Rogue TSA") as running:
        yield running


def roots(authority: LocalTSA) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(authority.ca_cert.read_bytes())


def test_a_token_over_the_checkpoint_text_checks_out_and_reports_its_time(
    tmp_path: Path, tsa: LocalTSA
) -> None:
    with AuditStore.open(f"sqlite:///{tmp_path / 'audit.db'}") as store:
        fill(store, requests=2)
        cp = signed_head(store, KEY)
    query = time_stamp_query(note_text(cp.note))
    stamp = accept_response(query, tsa.reply(query.as_bytes()), tsa.url)
    [check] = check_time_stamps(cp.note, [stamp], roots(tsa))
    assert check.ok, check.problem
    assert check.time is not None
    assert abs(check.time - datetime.now(UTC)) < timedelta(minutes=2)
    # a witness cosigning later changes the note, not the stamped text
    cosigned = add_cosignature(cp.note, "w.example/1", bytes.fromhex("33" * 32), 1_796_000_000)
    assert check_time_stamps(cosigned, [stamp], roots(tsa))[0].ok

    [untrusted] = check_time_stamps(cp.note, [stamp], roots_of_other_ca(tmp_path))
    assert not untrusted.ok and "not signed by a trusted TSA" in (untrusted.problem or "")
    other_text = cp.note.replace(f"\n{cp.tree_size}\n", "\n999\n", 1)
    [moved] = check_time_stamps(other_text, [stamp], roots(tsa))
    assert not moved.ok and "over other bytes" in (moved.problem or "")

    another = time_stamp_query(note_text(cp.note))  # a new nonce: the old answer is not its
    with pytest.raises(TimeStampError, match="not an answer to this request"):
        accept_response(another, tsa.reply(query.as_bytes()), tsa.url)
    with pytest.raises(TimeStampError, match="not an RFC 3161 time-stamp response"):
        accept_response(query, b"<html>hello</html>", tsa.url)


def roots_of_other_ca(tmp_path: Path) -> list[x509.Certificate]:
    from tests.support.tsa import make_authority

    make_authority(tmp_path / "other-ca", "Other")
    return x509.load_pem_x509_certificates((tmp_path / "other-ca" / "ca.crt").read_bytes())


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
        "GATEWAY_CHECKPOINT_KEY": KEY.hex(),
        "GATEWAY_TRUSTED_KEYS": RECORD.public_key,
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_timestamp_command_stamps_a_receipt_and_check_receipt_reports_the_time(
    db: str, tmp_path: Path, tsa: LocalTSA, rogue: LocalTSA
) -> None:
    receipt = tmp_path / "receipt.json"
    assert run(db, "audit", "prove", "req-1", "-o", str(receipt)).exit_code == 0
    check = ["audit", "check-receipt", str(receipt), "--public-key", PUBLIC]
    unstamped = run(db, *check, "--tsa-cert", str(tsa.ca_cert))
    assert unstamped.exit_code == 1 and "carries no time-stamp" in unstamped.output

    stamped = run(db, "audit", "timestamp", str(receipt), "--tsa", tsa.url,
                  "--tsa-cert", str(tsa.ca_cert))  # fmt: skip
    assert stamped.exit_code == 0, stamped.output
    assert "checked against --tsa-cert" in stamped.output
    assert len(load_checkpoint(receipt.read_text()).timestamps) == 1
    ok = run(db, *check, "--tsa-cert", str(tsa.ca_cert))
    assert ok.exit_code == 0, ok.output
    assert f"by {tsa.url} (serial " in ok.output and "time-stamped 20" in ok.output
    as_json = json.loads(run(db, *check, "--tsa-cert", str(tsa.ca_cert), "--format", "json").output)
    assert as_json["timestamps"][0]["ok"] is True and as_json["timestamps"][0]["time"]
    assert run(db, *check).exit_code == 0  # no --tsa-cert: nothing about time required

    untrusted = run(db, *check, "--tsa-cert", str(rogue.ca_cert))
    assert untrusted.exit_code == 1 and "not signed by a trusted TSA" in untrusted.output

    before = receipt.read_text()
    refused = run(db, "audit", "timestamp", str(receipt), "--tsa", rogue.url,
                  "--tsa-cert", str(tsa.ca_cert))  # fmt: skip
    assert refused.exit_code == 2 and "nothing was written" in refused.output
    assert receipt.read_text() == before


def test_a_token_moved_to_another_checkpoint_is_refused(
    db: str, tmp_path: Path, tsa: LocalTSA
) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    assert run(db, "audit", "tree-head", "-o", str(old)).exit_code == 0
    with AuditStore.open(db, signer=RECORD) as store:
        fill(store, requests=1)
    assert run(db, "audit", "tree-head", "-o", str(new)).exit_code == 0
    assert run(db, "audit", "timestamp", str(old), "--tsa", tsa.url).exit_code == 0
    certs = ["--tsa-cert", str(tsa.ca_cert)]
    half = run(db, "audit", "verify", "--from", str(old), "--to", str(new), *certs)
    assert half.exit_code == 1 and "NEW: the checkpoint carries no time-stamp" in half.output

    moved = json.loads(new.read_text())  # OLD's token pasted into NEW
    moved["timestamps"] = json.loads(old.read_text())["timestamps"]
    new.write_text(json.dumps(moved))
    forged = run(db, "audit", "verify", "--from", str(old), "--to", str(new), *certs)
    assert forged.exit_code == 1 and "over other bytes" in forged.output

    del moved["timestamps"]
    new.write_text(json.dumps(moved))
    assert run(db, "audit", "timestamp", str(new), "--tsa", tsa.url).exit_code == 0
    both = run(db, "audit", "verify", "--from", str(old), "--to", str(new), *certs)
    assert both.exit_code == 0, both.output
    assert "OLD time-stamped" in both.output and "NEW time-stamped" in both.output


def test_a_receipt_stamped_then_cosigned_checks_both(tmp_path: Path, tsa: LocalTSA) -> None:
    with AuditStore.open(f"sqlite:///{tmp_path / 'audit.db'}") as store:
        fill(store, requests=2)
        receipt = make_receipt(store, "req-0", KEY)
    cp = receipt.checkpoint
    query = time_stamp_query(note_text(cp.note))
    stamp = accept_response(query, tsa.reply(query.as_bytes()), tsa.url)
    seed = bytes.fromhex("33" * 32)
    note = add_cosignature(cp.note, "w.example/1", seed, 1_796_000_000)
    both = receipt.model_copy(
        update={"checkpoint": cp.model_copy(update={"note": note, "timestamps": (stamp,)})}
    )
    from audit.proofs.cosignature import Witness

    witness = Witness("w.example/1", public_of(seed))
    report = check_receipt(dumps(both), [PUBLIC], [witness], roots(tsa))
    assert report.ok, report.problems
    assert report.witnesses[0].ok and report.timestamps[0].ok


def test_timestamp_names_a_bad_url_and_a_tsa_that_does_not_answer(db: str, tmp_path: Path) -> None:
    head = tmp_path / "head.json"
    assert run(db, "audit", "tree-head", "-o", str(head)).exit_code == 0
    bad = run(db, "audit", "timestamp", str(head), "--tsa", "ftp://tsa.example/")
    assert bad.exit_code == 2 and "is not an http:// or https:// URL" in bad.output
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    down = run(db, "audit", "timestamp", str(head), "--tsa", f"http://127.0.0.1:{port}/")
    assert down.exit_code == 2 and "did not answer" in down.output
    assert "timestamps" not in head.read_text()
