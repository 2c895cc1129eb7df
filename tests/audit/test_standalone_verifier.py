"""The standalone verifier (verifier/verify_evidence.py) agrees with `gateway audit verify
--export` on every case of the export tamper matrix (same verdict, same defect kinds) and
with `audit check-receipt` on every case of the receipt tamper matrix, run in its own
process without the project."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore
from audit.proofs.checkpoint import public_key
from audit.proofs.receipt_checks import check_receipt
from audit.proofs.receipts import dumps, make_receipt
from audit.store.signing import Signer
from tests.audit.conftest import RECORD, fill
from tests.audit.test_export_content import (
    PASS,
    Rows,
    export,
    log,
    report,
    request_row,
    write,
)
from tests.audit.test_receipts import KEY, OTHER, PUBLIC, TAMPERINGS, tampered
from tests.support.standalone import run_standalone


def _drop_last_event(rows: Rows) -> Rows:
    head = rows[-1].pop("export_head")
    rows = rows[:-1]
    rows[-1]["export_head"] = head
    return rows


def _swap(rows: Rows, i: int, j: int) -> Rows:
    rows[i], rows[j] = rows[j], rows[i]
    return rows


def _set(row: dict[str, Any], key: str, value: Any) -> None:
    row[key] = value


def _answer_left_out(rows: Rows) -> None:
    content = request_row(rows, "r-1")["content"]
    content["evidence"]["events"] = [
        e for e in content["evidence"]["events"] if e["kind"] == "request"
    ]
    del content["evidence"]["payloads"]["response_body"]
    content.update(answer=None, answer_blocks=[], outcome="request", model="claude-sonnet-4-6")


def _swap_items(rows: Rows) -> None:
    one, two = request_row(rows, "r-1"), request_row(rows, "r-2")
    one["content"], two["content"] = two["content"], one["content"]


def _item_added(rows: Rows) -> None:
    response = next(r for r in rows if r.get("kind") == "response")
    response["content"] = request_row(rows, "r-1")["content"]


def _head_count(rows: Rows) -> None:
    """The EXPORT event's count of records lowered by one (its signature then fails too)."""
    head = rows[-1]["export_head"]
    head["body"] = re.sub(r'"events":(\d+)', lambda m: f'"events":{int(m[1]) - 1}', head["body"])


# Each alteration: rows -> rows (or None: changed in place).
TAMPERS: dict[str, Callable[[Rows], Rows | None]] = {
    "intact": lambda rows: None,
    "body": lambda rows: _set(rows[2], "body", rows[2]["body"].replace('"svc"', '"evil"')),
    "column": lambda rows: _set(rows[1], "task", "other"),
    "drop_middle": lambda rows: rows[:2] + rows[3:],
    "drop_end": lambda rows: rows[:-1],
    "drop_last_event": _drop_last_event,
    "signature": lambda rows: _set(rows[0], "signature", Signer.generate().sign(rows[0]["hash"])),
    "reorder": lambda rows: _swap(rows, 1, 2),
    "head_count": _head_count,
    "answer_shown": lambda rows: request_row(rows, "r-1")["content"].update(answer=PASS),
    "answer_everywhere": lambda rows: _set(
        request_row(rows, "r-1"),
        "content",
        json.loads(json.dumps(request_row(rows, "r-1")["content"]).replace("BLOCK", "PASS")),
    ),
    "item_removed": lambda rows: request_row(rows, "r-3").pop("content") and None,
    "item_added": _item_added,
    "items_swapped": _swap_items,
    "answer_left_out": _answer_left_out,
    "evidence_stripped": lambda rows: request_row(rows, "r-2")["content"].pop("evidence") and None,
}


@pytest.fixture(scope="module")
def exported_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Rows, Rows, Path]:
    """One log, exported with and without content (module-wide: each export is an event)."""
    folder = tmp_path_factory.mktemp("standalone")
    url, key = log.__wrapped__(folder)  # type: ignore[attr-defined]
    content = export(url, folder / "content.jsonl", "--with-content")
    plain = export(url, folder / "plain.jsonl")
    return content, plain, key


def _kinds(found: dict[str, Any]) -> list[str]:
    return sorted({d["kind"] if isinstance(d, dict) else d[2] for d in found["defects"]})


CONTENT_ONLY = {"answer_shown", "answer_everywhere", "item_removed", "items_swapped",
                "answer_left_out", "evidence_stripped"}  # fmt: skip
CASES = [(t, True) for t in TAMPERS] + [(t, False) for t in TAMPERS if t not in CONTENT_ONLY]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tamper", "content"), CASES, ids=[f"{t}-{'content' if c else 'plain'}" for t, c in CASES]
)
def test_the_standalone_verifier_agrees_with_audit_verify_export(
    exported_once: tuple[Rows, Rows, Path], tmp_path: Path, tamper: str, content: bool
) -> None:
    with_content, plain, key = exported_once
    rows = json.loads(json.dumps(with_content if content else plain))
    if not content and tamper == "item_added":
        request_row(rows, "r-1")["content"] = request_row(with_content, "r-1")["content"]
    else:
        rows = TAMPERS[tamper](rows) or rows
    path = write(tmp_path / "t.jsonl", rows)
    code, gateway = report(path, key)
    alone_code, alone = run_standalone(tmp_path, "export", path, "--record-key", key)
    assert (alone_code, _kinds(alone)) == (code, _kinds(gateway)), (alone, gateway["defects"])
    assert (code == 0) == (tamper == "intact")


@pytest.fixture(scope="module")
def receipt_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('receipts') / 'audit.db'}"
    with AuditStore.open(url, signer=RECORD) as store:
        fill(store, requests=6)
        return dumps(make_receipt(store, "req-3", KEY))


@pytest.mark.slow
@pytest.mark.parametrize("what", ["intact", *TAMPERINGS])
def test_the_standalone_verifier_agrees_with_check_receipt(
    receipt_text: str, tmp_path: Path, what: str
) -> None:
    text = receipt_text if what == "intact" else tampered(receipt_text, TAMPERINGS[what][0])
    path = tmp_path / "receipt.json"
    path.write_text(text)
    gateway = check_receipt(text, [PUBLIC], record_keys=[RECORD.public_key])
    code, alone = run_standalone(
        tmp_path, "receipt", path, "--checkpoint-key", PUBLIC, "--record-key", RECORD.public_key
    )
    assert (code == 0) == gateway.ok == (what == "intact"), (alone, gateway.problems)
    untrusted, _ = run_standalone(tmp_path, "receipt", path, "--checkpoint-key", public_key(OTHER))
    assert untrusted == 1
