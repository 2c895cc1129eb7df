"""A record signature's verdict in verify's walk: why a row's signature does not check out.

    signature_verdict(seq, kid, signature, event_hash, trust)  # None, True, or a Verdict
    keys = public_keys(trust)
    signed(keys, row)                  # None iff it checks out (verify's hot loop)

Both check by the same steps (:meth:`audit.store.signing.TrustedKeys.check`); ``signed`` only
says whether a row's signature checks out, without the layers around the steps, and
:func:`signature_verdict` judges and words any row it does not pass.
"""

from __future__ import annotations

from binascii import Error as Base64Error
from binascii import a2b_base64
from collections.abc import Mapping
from typing import Any, NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from audit.store.chain import EventRow
from audit.store.models import DefectKind
from audit.store.signing import DOMAIN, Trust


class Verdict(NamedTuple):
    """Why a row's record signature does not check out."""

    kind: DefectKind
    detail: str


def signature_verdict(
    seq: int, kid: str | None, signature: str | None, event_hash: str, trust: Trust
) -> Verdict | bool | None:
    """None when an event's signature checks out under ``trust``; True for an unsigned
    event that ``trust`` allows (it predates signing); else the :class:`Verdict`."""
    if signature is None and seq < trust.allow_unsigned_before:
        return True
    reason = trust.keys.check(kid, signature, event_hash)
    if reason is None:
        return None
    if signature is None:
        return Verdict(DefectKind.UNSIGNED, reason)
    if trust.keys.knows(kid):
        return Verdict(DefectKind.BAD_SIGNATURE, reason)
    return Verdict(DefectKind.UNTRUSTED_SIGNER, reason)


def public_keys(trust: Trust | None) -> dict[str, Ed25519PublicKey]:
    """The trusted keys by key id, for :func:`signed`."""
    return {
        k.key_id: Ed25519PublicKey.from_public_bytes(bytes.fromhex(k.public_key))
        for k in (trust.keys if trust is not None else ())
    }


def signed(keys: Mapping[Any, Ed25519PublicKey], row: EventRow) -> bool | None:
    """None when ``row``'s record signature is one of ``keys``' over its hash (what
    :func:`signature_verdict` finds then, by the same steps, without the layers around
    them: verify's hot loop); False otherwise, which signature_verdict then judges."""
    key = keys.get(row.key_id)
    signature = row.signature
    if key is None or type(signature) is not str:
        return False
    try:
        # base64.b64decode(validate=True) and signing.signed_message, as TrustedKeys.check
        key.verify(a2b_base64(signature, strict_mode=True), DOMAIN + row.hash.encode("ascii"))
    except (InvalidSignature, Base64Error, ValueError):
        return False
    return None
