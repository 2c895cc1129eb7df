"""Proofs about the log: signed checkpoints, the Merkle tree, receipts, witnesses, time-stamps.

    from audit.proofs import take_checkpoint, make_receipt
    head = take_checkpoint(store, key)          # a CHECKPOINT event, then its signed head
    receipt = make_receipt(store, "req-1", key) # a request's events proven into a signed head

The file formats (checkpoints, receipts, tree heads, C2SP signed notes and cosignatures,
RFC 3161 time-stamps) live in their modules; a format-2 log's proofs are audit.sequenced's.
"""

from audit.proofs.checkpoint import take_checkpoint, tree_root, verified_checkpoint
from audit.proofs.receipt_checks import check_consistency, check_receipt
from audit.proofs.receipts import make_receipt, signed_head

__all__ = [
    "check_consistency",
    "check_receipt",
    "make_receipt",
    "signed_head",
    "take_checkpoint",
    "tree_root",
    "verified_checkpoint",
]
