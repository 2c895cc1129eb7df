"""Receipts and tree checkpoints as the gateway's callers see them (audit.proofs.receipts).

    receipt = prove(settings, "req-1")      # GATEWAY_CHECKPOINT_KEY's, or the integrator's
    Path("receipt.json").write_text(receipt_text(receipt))
    report = check_receipt(Path("receipt.json"), [public_key_hex])       # no database
    report = check_consistency(settings, Path("old.json"), Path("new.json"), [])

Errors leave as the gateway's (through ``gateway._store_adapter``): an unreadable file or an
unusable key is an :class:`~gateway.errors.InputError`, a missing key a
``ConfigurationError``. A receipt or a pair of checkpoints that does not check out is a
report with ``ok`` false and its reasons.

A receipt or a tree head vouches for events, so both are signed only over events that
authenticate as the gateway's own (hash, link, columns, record signature under a trusted
key, within its key's era: audit.verify): `prove` checks the request's events, `tree-head`
every event its tree covers. Anything else is refused with the first event that fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

from audit.errors import CheckpointError
from audit.proofs import checkpoint as checkpoints
from audit.proofs.cosignature import Witness, WitnessCheck
from audit.proofs.receipt_checks import ConsistencyReport, ReceiptReport
from audit.proofs.receipt_checks import check_consistency as _check_consistency
from audit.proofs.receipt_checks import check_receipt as _check_receipt
from audit.proofs.receipt_files import ReceiptError
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
from audit.store.models import DefectKind
from audit.store.signing import Trust, TrustedKeys, UnusableKey, signature_check
from audit.verify import check_event, verify_log
from audit.verify.eras import KeyEras
from gateway._inputs import read_text_file
from gateway._store_adapter import StoreAdapter, audit_call
from gateway.errors import ConfigurationError, InputError
from gateway.evidence._checkpoint_rotation import CheckpointEras, refuse_retired_signer
from gateway.evidence._timestamping import tsa_roots
from gateway.keys import integrator_keys, record_signer, trusted_record_keys
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


# What makes an event not the gateway's own record: a tree head over one would vouch for it.
_NOT_AUTHENTIC = {
    DefectKind.HASH_MISMATCH,
    DefectKind.UNSIGNED,
    DefectKind.UNTRUSTED_SIGNER,
    DefectKind.BAD_SIGNATURE,
    DefectKind.RETIRED_KEY,
}
_AUTHENTIC_HINT = (
    "Run `gateway audit verify` to see every event that does not check out; receipts and tree "
    "heads vouch only for the gateway's own records (record keys: GATEWAY_TRUSTED_KEYS)."
)


def _record_keys(settings: Settings) -> TrustedKeys:
    keys = trusted_record_keys(settings, record_signer(settings, create=False))
    if not len(keys):
        raise ConfigurationError(
            "no record key is trusted, so no event can be shown to be the gateway's own, and "
            "nothing is signed.",
            hint="Set GATEWAY_TRUSTED_KEYS to the gateways' record public keys.",
        )
    return keys


def _authentic_events(store: AuditStore, request_id: str, keys: TrustedKeys) -> None:
    """ReceiptError unless every event of ``request_id`` checks out as the gateway's own."""
    check = signature_check(keys, store.store_id)
    eras = KeyEras.read(store, check)
    for event in store.events_for_request(request_id):
        problems = check_event(store, event, check, eras)
        if problems:
            raise ReceiptError(
                f"event {problems[0]}; no receipt is signed over it.", hint=_AUTHENTIC_HINT
            )


def _authentic_log(store: AuditStore, settings: Settings, keys: TrustedKeys, size: int) -> None:
    """ReceiptError unless events 1..``size`` authenticate (verify's walk, then each event
    appended since it counted)."""
    trust = Trust(keys, integrator=integrator_keys(settings))
    report = verify_log(store, trust=trust)
    for defect in report.defects:
        if defect.kind in _NOT_AUTHENTIC and defect.seq is not None and defect.seq <= size:
            raise ReceiptError(
                f"event seq {defect.seq} does not check out ({defect.detail}); no tree head is "
                "signed over it.",
                hint=_AUTHENTIC_HINT,
            )
    check = signature_check(keys, store.store_id)
    eras = KeyEras.read(store, check)
    for seq in range(report.head_seq + 1, size + 1):
        problems = check_event(store, store.event(seq), check, eras)
        if problems:
            raise ReceiptError(
                f"event {problems[0]}; no tree head is signed over it.", hint=_AUTHENTIC_HINT
            )


def prove(settings: Settings, request_id: str) -> Receipt:
    """Inclusion proofs of every event of ``request_id``: on a format-1 log against a
    checkpoint of the whole log as it is now, signed with ``GATEWAY_CHECKPOINT_KEY``; on a
    format-2 log against the newest integrator checkpoint that covers them, as the
    integrator signed it (``GATEWAY_INTEGRATOR_PUBLIC_KEYS`` says whose key to trust)."""
    with closing(StoreAdapter.open(settings)) as log:
        if log.store.sequenced_from is not None:
            keys = _integrator_keys(settings)
            record_keys = _record_keys(settings)
            log.run(_authentic_events, request_id, record_keys)
            return log.run(make_integrated_receipt, request_id, keys)
        key = _signing_key(settings)
        record_keys = _record_keys(settings)
        log.run(_authentic_events, request_id, record_keys)
        return log.run(make_receipt, request_id, key)


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
        earlier = audit_call(load_checkpoint, text)
    record_keys = _record_keys(settings)
    with closing(StoreAdapter.open(settings)) as log:
        if log.store.sequenced_from is not None:
            keys = _integrator_keys(settings)
            head = log.run(integrated_head, keys)
            log.run(_authentic_log, settings, record_keys, head.size)
            if rebuild:
                log.run(rebuild_integrated_tree, head.size)
            return log.run(signed_head, key, earlier, head=head)
        if rebuild:
            log.run(rebuild_tree)
        signed = log.run(signed_head, key, earlier)
        log.run(_authentic_log, settings, record_keys, signed.tree_size)
        return signed


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
    record_keys: Sequence[str] = (),
) -> ReceiptReport:
    """Check a receipt offline, trusting only ``public_keys`` (hex or base64), requiring a
    valid cosignature of each of ``witnesses`` (``NAME=KEY``), with ``tsa_certs`` (PEM CA
    files) a time-stamp by a TSA they certify, and with ``record_keys`` (the gateways' record
    public keys) each event's record signature by one of them."""
    if not public_keys:
        raise InputError(
            "checking a receipt needs the public key of the checkpoint key that signed it.",
            hint="Pass --public-key KEY (64 hex characters, or a file of keys).",
        )
    roots = tsa_roots(tsa_certs)
    text = read_text_file(path, "receipt")
    try:
        TrustedKeys.of(record_keys)
    except UnusableKey as exc:
        raise InputError(f"--record-key: {exc}") from None
    required = [audit_call(Witness.parse, w) for w in witnesses]
    return audit_call(_check_receipt, text, public_keys, required, roots, record_keys)


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
    required = [audit_call(Witness.parse, w) for w in witnesses]
    with closing(StoreAdapter.open(settings)) as log:
        # A head signed by a key the log retired before it is refused, as verify refuses it.
        check = signature_check(_record_keys(settings), log.store.store_id)
        eras = log.run(CheckpointEras.read, check)
        for text in (old_text, new_text):
            head = audit_call(load_checkpoint, text)
            refuse_retired_signer(head.public_key, head.tree_size, None, eras)
        return log.run(_check_consistency, old_text, new_text, keys, required, roots)
