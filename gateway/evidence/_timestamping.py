"""RFC 3161 time-stamps on tree checkpoints (audit.proofs), as the gateway's callers see it.

    outcome = timestamp(Path("head.json"), "https://tsa.example/tsr", tsa_certs=[Path("ca.pem")])
    roots = tsa_roots([Path("ca.pem")])          # for check_receipt / check_consistency

The query (SHA-256 of the checkpoint's text, a nonce) is POSTed to the TSA as
``application/timestamp-query``; the answer must be granted and answer this query. With
``tsa_certs`` the token is also checked against them before anything is written, so a TSA
that is not the one trusted is refused at once. The token is added to the file (a tree-head
file or a receipt), in place unless ``output`` says where, atomically. No database is used.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from cryptography.x509 import Certificate

from audit.proofs.receipts import RECEIPT_FORMAT, dumps, load_checkpoint, load_receipt
from audit.proofs.timestamp import (
    MAX_RESPONSE,
    accept_response,
    check_time_stamps,
    load_tsa_certificates,
    note_text,
    time_stamp_query,
)
from gateway._inputs import read_text_file
from gateway._store_adapter import audit_call
from gateway.errors import InputError

__all__ = ["StampOutcome", "timestamp", "tsa_roots"]

TIMEOUT_S = 30.0


class StampOutcome(NamedTuple):
    tsa: str
    time: datetime | None  # the token's time, when it was checked against tsa_certs
    serial: str | None
    verified: bool  # checked against the given TSA certificates
    origin: str
    tree_size: int
    written: Path


def tsa_roots(paths: Sequence[Path]) -> list[Certificate]:
    """The TSA CA certificates in ``paths`` (PEM files)."""
    roots: list[Certificate] = []
    for path in paths:
        try:
            pem = path.read_bytes()
        except OSError as exc:
            reason = exc.strerror
            raise InputError(f"cannot read the TSA certificate {str(path)!r}: {reason}.") from None
        roots += audit_call(load_tsa_certificates, pem)
    return roots


def _post(url: str, query: bytes) -> bytes:
    if urlsplit(url).scheme not in ("http", "https"):
        raise InputError(
            f"the TSA address {url[:80]!r} is not an http:// or https:// URL.",
            hint="Pass --tsa with the time-stamping authority's RFC 3161 URL.",
        )
    request = urllib.request.Request(  # noqa: S310 -- the scheme is checked just above
        url,
        data=query,
        method="POST",
        headers={
            "Content-Type": "application/timestamp-query",
            "Accept": "application/timestamp-reply",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:  # noqa: S310
            raw: bytes = answer.read(MAX_RESPONSE + 1)
    except urllib.error.HTTPError as exc:
        raise InputError(f"the TSA at {url[:80]} answered HTTP {exc.code} {exc.reason}.") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise InputError(f"the TSA at {url[:80]} did not answer ({reason}).") from None
    return raw


def timestamp(
    checkpoint_file: Path,
    tsa: str,
    tsa_certs: Sequence[Path] = (),
    output: Path | None = None,
) -> StampOutcome:
    """Ask the TSA at ``tsa`` for a token over the checkpoint's text and add it to the file."""
    roots = tsa_roots(tsa_certs)
    text = read_text_file(checkpoint_file, "checkpoint")
    checkpoint = audit_call(load_checkpoint, text)
    query = audit_call(time_stamp_query, audit_call(note_text, checkpoint.note))
    raw = _post(tsa, query.as_bytes())
    stamp = audit_call(accept_response, query, raw, tsa)
    stamped = checkpoint.model_copy(update={"timestamps": (*checkpoint.timestamps, stamp)})
    check = audit_call(check_time_stamps, stamped.note, [stamp], roots)[0] if roots else None
    if check is not None and not check.ok:
        raise InputError(
            f"{check.problem}; nothing was written.",
            hint="Pass the --tsa-cert of the TSA you trust, or ask that TSA.",
        )
    if json.loads(text).get("format") == RECEIPT_FORMAT:
        receipt = audit_call(load_receipt, text)
        new_text = dumps(receipt.model_copy(update={"checkpoint": stamped}))
    else:
        new_text = dumps(stamped)
    written = output or checkpoint_file
    temporary = written.with_name(f".{written.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(new_text, encoding="utf-8")
        os.replace(temporary, written)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise InputError(f"cannot write {written}: {exc.strerror}.") from None
    return StampOutcome(
        tsa=tsa,
        time=check.time if check is not None else None,
        serial=check.serial if check is not None else None,
        verified=check is not None,
        origin=checkpoint.origin,
        tree_size=checkpoint.tree_size,
        written=written,
    )
