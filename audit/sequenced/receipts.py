"""Receipts and tree heads on a format-2 log: proven against the integrator's checkpoints.

    receipt = make_integrated_receipt(store, "req-1", [integrator_public_hex])
    head = integrated_head(store, [integrator_public_hex])   # what `audit tree-head` signs

On a format-2 log (docs/scaling.md section 5) the integrator links the committed events and
signs checkpoints of the linked prefix (``chain_checkpoints``: its RFC 6962 root in a C2SP
signed note, by the integrator's key, from the event hashes it linked). A receipt carries the
newest such checkpoint that covers the request's events and passes under a trusted
integrator key, unchanged: a reader checks it offline with that public key alone. The stored
tree (``merkle_nodes``) only supplies the proof's hashes, and each proof is checked against
the root the integrator signed before anything is written, so a node the integrator role
planted or altered gives a refusal, never a receipt or a tree head of another root.

A request with an event the integrator has not linked, or linked but not yet signed in a
checkpoint, has no receipt yet: :class:`IntegrationPending` says so and what to do.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError
from sqlalchemy import text

from audit.errors import CheckpointError
from audit.proofs.merkle import ProofError, TreeHead
from audit.proofs.merkle_store import MerkleState
from audit.proofs.receipt_files import (
    Receipt,
    ReceiptError,
    TreeCheckpoint,
    checked_checkpoint,
    origin,
)
from audit.proofs.receipts import proven_events, request_events, self_checked
from audit.store import AuditStore
from audit.store.models import Checkpoint

__all__ = [
    "IntegrationPending",
    "integrated_head",
    "integrator_checkpoint",
    "make_integrated_receipt",
    "newest_integrator_row",
    "rebuild_integrated_tree",
]

# Checkpoint rows tried, newest first, before giving up: a row that does not check out (one
# the integrator role wrote without the key) is passed over for an older signed one.
CANDIDATES = 8
PENDING_HINT = (
    "Run `gateway audit integrate` (or wait for the running one's next checkpoint, every few "
    "seconds), then prove again."
)


class IntegrationPending(ReceiptError):
    """The request's events are not yet covered by a signed integrator checkpoint."""


def _keys(trusted: Iterable[str]) -> list[str]:
    keys = list(trusted)
    if not keys:
        raise ReceiptError(
            "no integrator public key is given: a format-2 log's receipts and tree heads are "
            "proven against the integrator's signed checkpoints.",
            hint="Set GATEWAY_INTEGRATOR_PUBLIC_KEYS to the public half of the integrator's "
            "key (`gateway audit integrate --key`).",
        )
    return keys


def _opened(store_id: str, size: int, stored: str, keys: list[str]) -> TreeCheckpoint:
    """The signed note of one ``chain_checkpoints`` row as a receipt's checkpoint, once it
    checks out under a trusted integrator key; :class:`ProofError` or CheckpointError."""
    # The note is the evidence (checked below); the JSON around it only carries it.
    signed = Checkpoint.model_validate_json(stored)
    if signed.note is None or signed.root is None or signed.public_key is None:
        raise ProofError("it carries no signed tree head")
    if signed.tree_size != size or signed.seq != size:
        raise ProofError(f"it signs a tree of {signed.tree_size} events, not {size}")
    found = TreeCheckpoint(
        origin=origin(store_id),
        tree_size=size,
        root=signed.root,
        public_key=signed.public_key,
        note=signed.note,
    )
    checked_checkpoint(found, keys)  # the note, under a trusted key that is its public_key
    return found


def integrator_checkpoint(
    store: AuditStore, covering: int, trusted: Iterable[str]
) -> TreeCheckpoint:
    """The newest integrator checkpoint of at least ``covering`` events (and not above the
    log's head) whose note checks out under a ``trusted`` integrator key (hex);
    :class:`IntegrationPending` if none covers them yet."""
    return newest_integrator_row(store, covering, trusted)[0]


def newest_integrator_row(
    store: AuditStore, covering: int, trusted: Iterable[str]
) -> tuple[TreeCheckpoint, str]:
    """:func:`integrator_checkpoint`, with the ``chain_checkpoints`` row's JSON it was read
    from (which also names the link at its size, outside the note)."""
    keys = _keys(trusted)
    if store.sequenced_from is None:
        raise ReceiptError(
            "this log is in format 1: it has no integrator checkpoints.",
            hint="Prove with GATEWAY_CHECKPOINT_KEY (`gateway audit prove` does).",
        )
    top = store.head()[0]
    with store.backend.reader.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT size, checkpoint FROM chain_checkpoints WHERE size >= :need "
                "AND size <= :top ORDER BY size DESC LIMIT :n"
            ),
            {"need": covering, "top": top, "n": CANDIDATES},
        ).all()
        newest = None
        if not rows:
            newest = conn.execute(
                text("SELECT max(size) FROM chain_checkpoints WHERE size <= :top"), {"top": top}
            ).scalar_one_or_none()
    if not rows:
        raise IntegrationPending(
            f"seq {covering} is not yet covered by a signed integrator checkpoint (the newest "
            f"covers seqs 1..{int(newest or 0)}): no receipt can be made yet.",
            hint=PENDING_HINT,
        )
    refused: list[str] = []
    for size, stored in rows:
        try:
            return _opened(store.store_id, int(size), str(stored), keys), str(stored)
        except (ProofError, CheckpointError, ValidationError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                reason = "it is not a gateway checkpoint"
            else:
                reason = exc.message if isinstance(exc, CheckpointError) else str(exc)
            refused.append(f"size {size}: {reason}")
    raise ReceiptError(
        f"no integrator checkpoint covering seq {covering} checks out under the trusted "
        f"integrator keys ({'; '.join(refused)[:400]}).",
        hint="Check that GATEWAY_INTEGRATOR_PUBLIC_KEYS is the integrator's public key, and "
        "run `gateway audit verify`: a checkpoint row was written without the integrator key.",
    )


def make_integrated_receipt(store: AuditStore, request_id: str, trusted: Iterable[str]) -> Receipt:
    """Inclusion proofs of every event of ``request_id`` against the newest integrator
    checkpoint that covers them, as the integrator signed it (nothing is signed here)."""
    keys = _keys(trusted)
    events = request_events(store, request_id)
    unlinked = sorted(store.pending_integration(e.seq for e in events))
    if unlinked:
        shown = ", ".join(map(str, unlinked[:5])) + (", ..." if len(unlinked) > 5 else "")
        raise IntegrationPending(
            f"request {request_id!r} has event(s) the integrator has not linked yet (seq "
            f"{shown}): no signed checkpoint covers them, so no receipt can be made yet.",
            hint=PENDING_HINT,
        )
    checkpoint = integrator_checkpoint(store, max(e.seq for e in events), keys)
    proven = proven_events(store, events, checkpoint, keys)
    return self_checked(Receipt(request_id=request_id, checkpoint=checkpoint, events=proven))


def integrated_head(store: AuditStore, trusted: Iterable[str]) -> TreeHead:
    """The tree head of the newest integrator checkpoint that checks out under a
    ``trusted`` key: the root a format-2 log's `tree-head` signs, never one read from the
    stored tree."""
    checkpoint = integrator_checkpoint(store, 1, trusted)
    return checkpoint.head


def rebuild_integrated_tree(store: AuditStore, upto: int) -> int:
    """Recompute the stored tree of the first ``upto`` events (a format-2 log's linked
    prefix: the seqs above it may not all have a row yet); the owner of the tables only."""
    return MerkleState(store.backend).rebuild(upto)
