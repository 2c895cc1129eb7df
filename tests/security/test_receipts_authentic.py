"""Receipts prove only authentic rows (issue 26, item 4).

The attack: whoever can write the database appends a well-linked but unsigned REQUEST and
RESPONSE under a request id of its own. `audit prove` signed a receipt over them and
`audit tree-head` a head over the log that holds them, and `check-receipt` said the receipt
checks out: the checkpoint key vouched for rows no gateway wrote. Now both check the record
signature (and key era) of each event they cover and refuse otherwise, and a receipt carries
each event's record signature and key id, which `check-receipt --record-key` checks offline.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from audit import AuditStore
from audit.store.signing import Signer
from gateway.cli import main
from tests.audit.conftest import Raw
from tests.gateway.conftest import MakeGateway
from tests.security.test_record_signatures import forge_after_head

QUESTION = "Transaction: EUR 9,500 cash deposit, third this week, customer account 4471."
RECORD = Signer.from_text("7a" * 32)
CHECKPOINT_KEY = "7b" * 32


def cli(url: str, *args: str) -> Result:
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_RECORD_KEY": RECORD.seed_hex(),
        "GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY,
    }
    return CliRunner().invoke(main, list(args), env=env)


def _forged_life(make_gateway: MakeGateway, url: str) -> tuple[str, int]:
    """A genuine request, then a forged unsigned life copied from it: (genuine id, forged
    RESPONSE seq)."""
    first = make_gateway(offline=True, record_key=RECORD.seed_hex()).complete(
        "compliance_review", QUESTION, caller="desk"
    )
    with AuditStore.open(url, create=False) as store:
        request_seq, response_seq = (e.seq for e in store.events_for_request(first.request_id))
    raw = Raw(url)
    try:
        raw.unguard()
        forge_after_head(raw, url, request_seq, request_id="req_forged")
        forged = forge_after_head(raw, url, response_seq, request_id="req_forged")
    finally:
        raw.close()
    return first.request_id, forged


def _refused(result: Result, what: str) -> None:
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "does not check out" in line and what in line and "Traceback" not in line


def test_prove_and_tree_head_refuse_to_vouch_for_forged_rows(
    make_gateway: MakeGateway, db_path: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{db_path}"
    genuine, forged = _forged_life(make_gateway, url)
    _refused(cli(url, "audit", "prove", "req_forged"), f"seq {forged - 1}")
    _refused(cli(url, "audit", "tree-head"), f"seq {forged - 1}")
    # The genuine request's events are all signed: its receipt is still made.
    receipt = tmp_path / "receipt.json"
    made = cli(url, "audit", "prove", genuine, "-o", str(receipt))
    assert made.exit_code == 0, made.output
    assert RECORD.key_id in receipt.read_text()


def test_a_receipt_carries_what_check_receipt_needs_to_check_each_signature(
    make_gateway: MakeGateway, db_path: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{db_path}"
    done = make_gateway(offline=True, record_key=RECORD.seed_hex()).complete(
        "compliance_review", QUESTION, caller="desk"
    )
    receipt = tmp_path / "receipt.json"
    assert cli(url, "audit", "prove", done.request_id, "-o", str(receipt)).exit_code == 0
    data = json.loads(receipt.read_text())
    assert all(e["key_id"] == RECORD.key_id and e["signature"] for e in data["events"])

    checkpoint_public = json.loads(receipt.read_text())["checkpoint"]["public_key"]
    offline = ["audit", "check-receipt", str(receipt), "--public-key", checkpoint_public]
    checked = cli(url, *offline, "--record-key", RECORD.public_key, "--format", "json")
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["record_signatures_checked"] is True

    other = Signer.from_text("7c" * 32)
    wrong_key = cli(url, *offline, "--record-key", other.public_key)
    assert wrong_key.exit_code == 1 and "record signature" in wrong_key.output

    data["events"][0]["signature"] = data["events"][1]["signature"]  # another event's
    receipt.write_text(json.dumps(data))
    swapped = cli(url, *offline, "--record-key", RECORD.public_key)
    assert swapped.exit_code == 1 and "signature does not check out" in swapped.output
