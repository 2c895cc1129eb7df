"""Receipts and tree checkpoints as the gateway's callers see them (audit.proofs.receipts).

    receipt = prove(settings, "req-1")      # GATEWAY_CHECKPOINT_KEY's, or the integrator's
    Path("receipt.json").write_text(receipt_text(receipt))
    report = check_receipt(Path("receipt.json"), [public_key_hex])       # no database
    report = check_consistency(settings, Path("old.json"), Path("new.json"), [])

Errors leave as the gateway's (``translated``): an unreadable file or an unusable key is an
:class:`~gateway.errors.InputError`, a missing key a ``ConfigurationError``. A receipt or a
pair of checkpoints that does not check out is a report with ``ok`` false and its reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from audit.errors import CheckpointError
from audit.proofs import checkpoint as checkpoints
from audit.proofs.cosignature import Witness, WitnessCheck
from audit.proofs.receipt_checks import ConsistencyReport, ReceiptReport
from audit.proofs.receipt_checks import check_consistency as _check_consistency
from audit.proofs.receipt_checks import check_receipt as _check_receipt
from audit.proofs.receipts import (
    Receipt,
    TreeCheckpoint,
    dumps,
    load_checkpoint,
    make_receipt,
    rebuild_tree,
    signed_head,
    verifier_key,
)
from audit.proofs.timestamp import TimeStampCheck
from audit.sequenced.receipts import (
    integrated_head,
    make_integrated_receipt,
    rebuild_integrated_tree,
)
from audit.store import AuditStore
from gateway._audit_errors import translated
from gateway._inputs import read_text_file
from gateway.errors import ConfigurationError, InputError
from gateway.evidence._timestamping import tsa_roots
from gateway.keys import integrator_keys
from gateway.settings import Settings

__all__ = [
    "ConsistencyReport",
    "Receipt",
    "ReceiptReport",
    "TimeStampCheck",
    "TreeCheckpoint",
    "WitnessCheck",
    "check_consistency",
    "check_receipt",
    "note_verifier_key",
    "prove",
    "receipt_text",
    "tree_checkpoint_text",
    "tree_head",
]


def _signing_key(settings: Settings) -> bytes:
    secret = settings.checkpoint_key
    if secret is None:
        raise ConfigurationError(
            "no checkpoint signing key is configured: a receipt's checkpoint is signed.",
            hint=checkpoints.KEY_HINT,
        )
    try:
        return checkpoints.parse_key(secret.get_secret_value())
    except CheckpointError as exc:
        raise ConfigurationError(exc.message, hint=exc.hint) from exc


def _open(settings: Settings) -> AuditStore:
    with translated():
        return AuditStore.open(settings.database_url, settings.durability.value, create=False)


def prove(settings: Settings, request_id: str) -> Receipt:
    """Inclusion proofs of every event of ``request_id``: on a format-1 log against a
    checkpoint of the whole log as it is now, signed with ``GATEWAY_CHECKPOINT_KEY``; on a
    format-2 log against the newest integrator checkpoint that covers them, as the
    integrator signed it (``GATEWAY_INTEGRATOR_PUBLIC_KEYS`` says whose key to trust)."""
    store = _open(settings)
    try:
        if store.sequenced_from is not None:
            keys = _integrator_keys(settings)
            with translated():
                return make_integrated_receipt(store, request_id, keys)
        key = _signing_key(settings)
        with translated():
            return make_receipt(store, request_id, key)
    finally:
        store.close()


def _integrator_keys(settings: Settings) -> list[str]:
    keys = integrator_keys(settings)
    if keys is None:
        raise ConfigurationError(
            "this audit log is in format 2 and no integrator public key is configured: its "
            "receipts and tree heads are proven against the integrator's signed checkpoints.",
            hint="Set GATEWAY_INTEGRATOR_PUBLIC_KEYS to the public half of the integrator's "
            "key (`gateway audit integrate --key`).",
        )
    return [k.public_key for k in keys]


def tree_head(
    settings: Settings, *, rebuild: bool = False, proof_from: Path | None = None
) -> TreeCheckpoint:
    """The log's Merkle tree head now, signed: keep it, and check later checkpoints extend
    it (:func:`check_consistency`). ``rebuild`` first recomputes the stored tree from the
    log (its table's owner only, on PostgreSQL). ``proof_from`` (an earlier head file or
    receipt): sign only if the new head extends it, and carry the consistency proof. On a
    format-2 log the head signed is the newest integrator checkpoint's, never a root read
    from the stored tree."""
    key = _signing_key(settings)
    earlier = None
    if proof_from is not None:
        text = read_text_file(proof_from, "earlier checkpoint")
        with translated():
            earlier = load_checkpoint(text)
    store = _open(settings)
    try:
        if store.sequenced_from is not None:
            keys = _integrator_keys(settings)
            with translated():
                head = integrated_head(store, keys)
                if rebuild:
                    rebuild_integrated_tree(store, head.size)
                return signed_head(store, key, earlier, head=head)
        with translated():
            if rebuild:
                rebuild_tree(store)
            return signed_head(store, key, earlier)
    finally:
        store.close()


def receipt_text(receipt: Receipt) -> str:
    return dumps(receipt)


def tree_checkpoint_text(checkpoint: TreeCheckpoint) -> str:
    return dumps(checkpoint)


def note_verifier_key(checkpoint: TreeCheckpoint) -> str:
    """The signer as C2SP tools name a key (``origin+keyid+base64``), for a Go verifier."""
    return verifier_key(checkpoint.origin, bytes.fromhex(checkpoint.public_key))


def check_receipt(
    path: Path,
    public_keys: Sequence[str],
    witnesses: Sequence[str] = (),
    tsa_certs: Sequence[Path] = (),
) -> ReceiptReport:
    """Check a receipt offline, trusting only ``public_keys`` (hex or base64), requiring a
    valid cosignature of each of ``witnesses`` (``NAME=KEY``) and, with ``tsa_certs`` (PEM
    CA files), a time-stamp by a TSA they certify."""
    if not public_keys:
        raise InputError(
            "checking a receipt needs the public key of the checkpoint key that signed it.",
            hint="Pass --public-key KEY (64 hex characters, or a file of keys).",
        )
    roots = tsa_roots(tsa_certs)
    text = read_text_file(path, "receipt")
    with translated():
        required = [Witness.parse(w) for w in witnesses]
        return _check_receipt(text, public_keys, required, roots)


def check_consistency(
    settings: Settings,
    old: Path,
    new: Path,
    public_keys: Sequence[str],
    witnesses: Sequence[str] = (),
    tsa_certs: Sequence[Path] = (),
) -> ConsistencyReport:
    """Whether checkpoint ``new`` extends ``old``, proven from the log. Trusted signers:
    ``public_keys`` and the key of ``GATEWAY_CHECKPOINT_KEY``. Not the record keys of
    ``GATEWAY_TRUSTED_KEYS``: a record key's holder who can write the database could rewrite
    the log and sign both heads to match."""
    keys = list(public_keys)
    if settings.checkpoint_key is not None:
        keys.append(checkpoints.public_key(_signing_key(settings)))
    if not keys:
        raise InputError(
            "checking checkpoints needs the public key that signed them.",
            hint="Pass --public-key FILE or set GATEWAY_CHECKPOINT_KEY.",
        )
    old_text, new_text = read_text_file(old, "checkpoint"), read_text_file(new, "checkpoint")
    roots = tsa_roots(tsa_certs)
    with translated():
        required = [Witness.parse(w) for w in witnesses]
    store = _open(settings)
    try:
        with translated():
            return _check_consistency(store, old_text, new_text, keys, required, roots)
    finally:
        store.close()
