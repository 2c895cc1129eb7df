"""Proofs about the log: signed checkpoints, the Merkle tree, receipts, witnesses, time-stamps.

    from audit.proofs import take_checkpoint, make_receipt
    head = take_checkpoint(store, key)          # a CHECKPOINT event, then its signed head
    receipt = make_receipt(store, "req-1", key) # a request's events proven into a signed head

The file formats (checkpoints, receipts, tree heads, C2SP signed notes and cosignatures,
RFC 3161 time-stamps) live in their modules; a format-2 log's proofs are audit.sequenced's.

Each name loads on first use (as the ``audit`` face does), so that importing one module of
this room does not import the others.
"""

import typing as _typing

from audit.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from audit.proofs.checkpoint import take_checkpoint, tree_root, verified_checkpoint
    from audit.proofs.receipt_checks import check_consistency, check_receipt
    from audit.proofs.receipts import make_receipt, signed_head

# Where each name that loads on first use lives.
_LAZY = {
    "take_checkpoint": "audit.proofs.checkpoint",
    "tree_root": "audit.proofs.checkpoint",
    "verified_checkpoint": "audit.proofs.checkpoint",
    "check_consistency": "audit.proofs.receipt_checks",
    "check_receipt": "audit.proofs.receipt_checks",
    "make_receipt": "audit.proofs.receipts",
    "signed_head": "audit.proofs.receipts",
}

__all__ = [
    "check_consistency",
    "check_receipt",
    "make_receipt",
    "signed_head",
    "take_checkpoint",
    "tree_root",
    "verified_checkpoint",
]


__getattr__ = _lazy_names(__name__, _LAZY)
