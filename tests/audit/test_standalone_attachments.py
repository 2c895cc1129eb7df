"""The standalone verifier checks a request body whose base64 attachments the log stores as
markers (gateway._attachment_payloads): the export carries the body as sent, and the
verifier re-derives the stored form to match the signed digest. It agrees with `audit verify
--export` on the intact export and on one whose attachment was changed."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from audit import AuditStore, EventDraft, EventKind
from gateway import Settings
from gateway._attachment_payloads import stored_payloads
from gateway.keys import record_signer
from tests.audit.test_export_content import Rows, export, report, request_row, write
from tests.support.standalone import run_standalone

PICTURE = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(200))).decode()
OTHER = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(1, 201))).decode()


def _log(folder: Path) -> tuple[str, Path]:
    url = f"sqlite:///{folder / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    assert signer is not None
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PICTURE}}  # fmt: skip
    tool = {"type": "tool_result", "tool_use_id": "t1", "content": [image]}
    sent = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [
        {"role": "user", "content": [image, {"type": "text", "text": "What is this?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "look",
                                           "input": {}}]},
        {"role": "user", "content": [tool]},
    ]}  # fmt: skip
    answer = {"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
              "content": [{"type": "text", "text": "A picture."}]}  # fmt: skip
    common = {
        "request_id": "r-1",
        "task": "kyc",
        "caller": "svc",
        "request_hash": "sha256:" + "1" * 64,
    }
    payloads = stored_payloads("request_body", json.dumps(sent).encode())
    assert len(payloads) == 2  # the body with markers, and the picture stored once
    with AuditStore.open(url, signer=signer) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, data={"model_id": "claude-sonnet-4-6"},
                                payloads=payloads, **common))  # fmt: skip
        answered = {"response_body": json.dumps(answer).encode()}
        store.append(EventDraft(kind=EventKind.RESPONSE, data={"ok": True}, payloads=answered,
                                **common))  # fmt: skip
    key = folder / "record.pub"
    key.write_text(signer.public_key + "\n")
    return url, key


def _changed(rows: Rows) -> Rows:
    changed: Rows = json.loads(json.dumps(rows).replace(PICTURE, OTHER))
    return changed


@pytest.mark.slow
@pytest.mark.parametrize("tamper", ["intact", "picture_changed"])
def test_the_standalone_verifier_checks_attachments_as_audit_verify_does(
    tmp_path: Path, tamper: str
) -> None:
    url, key = _log(tmp_path)
    rows = export(url, tmp_path / "content.jsonl", "--with-content")
    assert PICTURE in json.dumps(request_row(rows, "r-1")["content"])  # shown as sent
    path = write(tmp_path / "t.jsonl", rows if tamper == "intact" else _changed(rows))
    code, found = report(path, key)
    alone, standalone = run_standalone(tmp_path, "export", path, "--record-key", key)
    assert (alone, code) == ((0, 0) if tamper == "intact" else (1, 1)), (found, standalone)
    kinds = sorted({d[2] for d in standalone["defects"]})
    assert kinds == sorted({d["kind"] for d in found["defects"]})
    assert standalone["content_checked"] == (1 if tamper == "intact" else 0)
