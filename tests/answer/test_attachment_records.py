"""Each attachment is in the REQUEST's data by digest, media type and size: the same file has
the same digest in every request that sends it."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from audit import EventKind
from gateway import Gateway
from tests.gateway.conftest import events

PDF = b"%PDF-1.7\n1 0 obj << /Title (Prospectus) >> endobj\n%%EOF\n"


def _asking(question: str, pdf: bytes = PDF) -> list[dict[str, Any]]:
    source = {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(pdf).decode(),
    }
    document = {"type": "document", "source": source, "title": "Prospectus"}
    return [{"role": "user", "content": [document, {"type": "text", "text": question}]}]


def test_two_requests_with_the_same_pdf_name_the_same_digest(gw: Gateway, db_path: Path) -> None:
    gw.complete("prospectus_summary", messages=_asking("Summarise the risks."))
    gw.complete("prospectus_summary", messages=_asking("Summarise the fees."))
    requests = [e for e in events(db_path) if e.kind == EventKind.REQUEST]
    assert len(requests) == 2
    expected = {
        "message": 1,
        "block": 1,
        "type": "document",
        "source": "base64",
        "media_type": "application/pdf",
        "size": len(PDF),
        "digest": "sha256:" + hashlib.sha256(PDF).hexdigest(),
    }
    assert [r.data["attachments"] for r in requests] == [[expected], [expected]]
    # The requests differ (their question), so each has its own body; the file is one digest.
    bodies = {r.payload_digests["request_body"] for r in requests}
    assert len(bodies) == 2


def test_another_file_has_another_digest(gw: Gateway, db_path: Path) -> None:
    gw.complete("prospectus_summary", messages=_asking("Summarise.", PDF + b"% v2\n"))
    gw.complete("prospectus_summary", messages=_asking("Summarise."))
    first, second = (
        e.data["attachments"][0]["digest"] for e in events(db_path) if e.kind == EventKind.REQUEST
    )
    assert first != second


def test_a_request_without_attachments_records_none(gw: Gateway, db_path: Path) -> None:
    gw.complete("compliance_review", "Transaction: EUR 10.")
    (request,) = [e for e in events(db_path) if e.kind == EventKind.REQUEST]
    assert "attachments" not in request.data
