"""RFC 3161 time-stamps over a tree checkpoint's signed bytes (rfc3161-client).

    query = time_stamp_query(note_text(cp.note))      # send query.as_bytes() to the TSA
    token = accept_response(query, tsa_answer_bytes, "https://tsa.example/")   # checks it
    checks = check_time_stamps(cp.note, cp.timestamps, load_tsa_certificates(pem))

A signed checkpoint says what the log held, and a witness that the log did not fork, but
neither proves *when*: the log's key could sign a head today and date it last year. A
time-stamping authority's token over the checkpoint's text (the note without its signature
lines: the origin, tree size and root, which is what the log key and every witness sign)
proves the tree existed by the token's time. Cosignatures added later do not change the
stamped bytes, so one token stays valid for the life of the checkpoint.

The token is kept as the TSA's whole DER ``TimeStampResp`` (base64) in the checkpoint file
(:class:`TimeStamp`); checking it needs only the TSA's CA certificate. Verification is
rfc3161-client's: status granted, the SignedData signature chains to a trusted root at the
token's time, the signer certificate has the critical id-kp-timeStamping EKU, and the
message imprint is the hash of these bytes. This module does no I/O: the query is sent by
the caller (gateway.evidence).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Final

from cryptography import x509
from pydantic import BaseModel, ConfigDict
from rfc3161_client import (
    HashAlgorithm,
    PKIStatus,
    TimeStampRequest,
    TimestampRequestBuilder,
    TimeStampResponse,
    VerificationError,
    VerifierBuilder,
    decode_timestamp_response,
)

from audit.errors import CheckpointError

MAX_RESPONSE: Final = 64 * 1024  # a TimeStampResp with its certificates is a few KB
MAX_CERTIFICATES: Final = 1024 * 1024
HASHES: Final = {  # message-imprint OIDs rfc3161-client checks, and how to hash with them
    "2.16.840.1.101.3.4.2.1": hashlib.sha256,
    "2.16.840.1.101.3.4.2.2": hashlib.sha384,
    "2.16.840.1.101.3.4.2.3": hashlib.sha512,
}


class TimeStampError(CheckpointError):
    """A TSA answer, a token or a certificate file that cannot be used."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TimeStamp(_Frozen):
    """One TSA's token over a checkpoint's text, as the checkpoint file carries it."""

    tsa: str  # where it was asked for: for a reader, not trusted
    response: str  # base64 of the DER TimeStampResp


class TimeStampCheck(_Frozen):
    tsa: str
    ok: bool
    time: datetime | None  # the TSA's genTime, once the token checks out
    serial: str | None  # the token's serial number (hex), to find it in the TSA's records
    problem: str | None


def note_text(note: str) -> bytes:
    """The bytes a checkpoint's signatures cover: the note up to its blank line."""
    cut = note.rfind("\n\n")
    if cut < 0:
        raise TimeStampError("the checkpoint is not a signed note (no blank line).")
    return note[: cut + 1].encode("utf-8")


def time_stamp_query(message: bytes) -> TimeStampRequest:
    """A TimeStampReq for ``message`` (send ``.as_bytes()``): SHA-256 imprint, a nonce, the
    TSA's certificate asked for (so that a reader needs only the TSA's CA)."""
    builder = TimestampRequestBuilder().data(message).hash_algorithm(HashAlgorithm.SHA256)
    return builder.nonce(nonce=True).cert_request(cert_request=True).build()


def _decode(raw: bytes) -> TimeStampResponse:
    if len(raw) > MAX_RESPONSE:
        raise TimeStampError(f"the TSA's answer is over {MAX_RESPONSE // 1024} KB.")
    try:
        return decode_timestamp_response(raw)
    except ValueError as exc:
        raise TimeStampError(
            f"the TSA's answer is not an RFC 3161 time-stamp response ({str(exc)[:120]})."
        ) from None


def accept_response(query: TimeStampRequest, raw: bytes, tsa: str) -> TimeStamp:
    """The token in the TSA's answer ``raw`` to ``query``, once it is granted and answers
    this query (same imprint, same nonce); its signature is checked by a reader who holds
    the TSA's certificate (:func:`check_time_stamps`)."""
    response = _decode(raw)
    # Only "granted": a reader's check (rfc3161-client) refuses "granted with modifications".
    if response.status != PKIStatus.GRANTED:
        said = "; ".join(response.status_string)[:200] or "no reason given"
        raise TimeStampError(f"the TSA refused the time-stamp (status {response.status}: {said}).")
    info = response.tst_info
    if info.message_imprint.message != query.message_imprint.message or info.nonce != query.nonce:
        raise TimeStampError(
            "the TSA's token is not an answer to this request (another imprint or nonce).",
            hint="Check --tsa points at a time-stamping authority; nothing was written.",
        )
    return TimeStamp(tsa=tsa, response=base64.b64encode(raw).decode("ascii"))


def load_tsa_certificates(pem: bytes) -> list[x509.Certificate]:
    """The CA certificates (PEM, one or more) whose TSAs a reader trusts."""
    if len(pem) > MAX_CERTIFICATES:
        raise TimeStampError("the TSA certificate file is over 1 MB.")
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError:
        certificates = []
    if not certificates:
        raise TimeStampError(
            "the TSA certificate file holds no PEM certificate.",
            hint="Pass --tsa-cert with the PEM certificate of the TSA's certification "
            "authority (the root its signing certificate chains to).",
        )
    return certificates


def check_time_stamps(
    note: str, stamps: Iterable[TimeStamp], roots: Sequence[x509.Certificate]
) -> list[TimeStampCheck]:
    """Each token's check against the trusted TSA ``roots`` over ``note``'s text."""
    message = note_text(note)
    return [_check(message, stamp, roots) for stamp in stamps]


def _check(message: bytes, stamp: TimeStamp, roots: Sequence[x509.Certificate]) -> TimeStampCheck:
    def result(problem: str | None, response: TimeStampResponse | None = None) -> TimeStampCheck:
        info = response.tst_info if response is not None else None
        return TimeStampCheck(
            tsa=stamp.tsa,
            ok=problem is None,
            time=info.gen_time if info is not None and problem is None else None,
            serial=format(info.serial_number, "x") if info is not None else None,
            problem=problem,
        )

    try:
        response = _decode(base64.b64decode(stamp.response, validate=True))
    except (binascii.Error, ValueError, TimeStampError):
        return result(f"the time-stamp from {stamp.tsa[:80]} is not a readable token")
    imprint = response.tst_info.message_imprint
    hash_of = HASHES.get(imprint.hash_algorithm.dotted_string)
    if hash_of is None or hash_of(message).digest() != imprint.message:
        return result(
            f"the time-stamp from {stamp.tsa[:80]} is over other bytes than this checkpoint's "
            "tree size and root: it belongs to another checkpoint, or the note was altered",
            response,
        )
    builder = VerifierBuilder()
    for root in roots:
        builder = builder.add_root_certificate(root)
    try:
        builder.build().verify_message(response, message)
    except VerificationError as exc:
        return result(
            f"the time-stamp from {stamp.tsa[:80]} is not signed by a trusted TSA ({_reason(exc)})",
            response,
        )
    return result(None, response)


def _reason(exc: VerificationError) -> str:
    """The OpenSSL verify error inside rfc3161-client's message, or its first words."""
    text = str(exc)
    at = text.find("Verify error: ")
    if at >= 0:
        return text[at + len("Verify error: ") :].split('"', 1)[0][:120]
    return text[:120]
