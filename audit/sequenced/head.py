"""`audit checkpoint` on a format-2 log: the integrator's newest signed head, countersigned.

    head = integrated_checkpoint(store, checkpoint_key, [integrator_public_hex])
    text = audit.proofs.checkpoint.dumps(head)         # the auditor keeps it outside the database

A format-2 event's own hash is its body's, not a link, so the head an auditor keeps must be
a link the integrator made: the newest integrator checkpoint that checks out under a trusted
integrator key (picked as a receipt picks it, audit.sequenced.receipts), with the link at
its size and the Merkle root the integrator signed. That head is signed again, as format 1's
is, with ``GATEWAY_CHECKPOINT_KEY``:

- the root is the one the integrator computed from the event hashes it linked, never one
  read from ``merkle_nodes`` (which the integrator role may write), and the link is checked
  against ``chain`` before it is signed;
- the file is signed by the key kept away from the database's administrators and the
  integrator host (which may write ``chain`` and ``chain_checkpoints``), and pinned at
  `verify --checkpoint` as format 1's files are: one rule for both formats.

The CHECKPOINT event this records (the reviewer's read, naming the integrator checkpoint it
countersigned) is itself pending integration, so the head does not cover it: the next
integrator checkpoint does.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable

from sqlalchemy import text

from audit.errors import CheckpointError
from audit.proofs import checkpoint as cp
from audit.sequenced.receipts import IntegrationPending, newest_integrator_row
from audit.store import AuditStore
from audit.store.models import Checkpoint, EventDraft, EventKind

NO_KEYS_HINT = (
    "Set GATEWAY_INTEGRATOR_PUBLIC_KEYS to the public half of the integrator's key "
    "(`gateway audit integrate --key`)."
)


def integrated_checkpoint(
    store: AuditStore, key: bytes | None, integrator_keys: Iterable[str]
) -> Checkpoint:
    """Record a CHECKPOINT event, then sign (with ``key``; None: unsigned) the head of the
    newest integrator checkpoint that checks out under ``integrator_keys`` (hex)."""
    keys = list(integrator_keys)
    if not keys:
        raise CheckpointError(
            "this audit log is in format 2 and no integrator public key is configured: its "
            "checkpoint is the integrator's newest signed head, checked under that key.",
            hint=NO_KEYS_HINT,
        )
    try:
        tree, stored = newest_integrator_row(store, 1, keys)
    except IntegrationPending:
        raise CheckpointError(
            "this format-2 log has no integrator checkpoint yet, so there is no signed head "
            "to checkpoint.",
            hint="Run `gateway audit integrate` (it signs the linked head), then checkpoint again.",
        ) from None
    size = tree.tree_size
    link = _checked_link(store, size, stored, keys)
    public = cp.public_key(key) if key is not None else None  # a bad key writes nothing
    appended = store.append(
        EventDraft(
            kind=EventKind.CHECKPOINT,
            request_id=f"checkpoint-{uuid.uuid4().hex}",
            data={"signed": key is not None, "public_key": public, "integrator_checkpoint": size},
        )
    )
    root = base64.b64decode(tree.root)
    return cp.sign(store.store_id, size, link, appended.recorded_at, key, root=root)


def _checked_link(store: AuditStore, size: int, stored: str, keys: list[str]) -> str:
    """The link the integrator's checkpoint names at ``size``: its JSON signed by a trusted
    integrator key (the note it was picked by covers the root, not the link) and the link
    the chain holds there."""
    problem = f"the integrator's newest checkpoint (seqs 1..{size})"
    hint = "Run `gateway audit verify`: a checkpoint or chain row the integrator did not write."
    try:
        signed = cp.loads(stored)
    except CheckpointError as exc:
        raise CheckpointError(f"{problem}: {exc.message}", hint=hint) from None
    if signed.public_key not in keys or signed.seq != size:
        raise CheckpointError(
            f"{problem} is not signed for that size by a trusted integrator key.", hint=hint
        )
    with store.backend.reader.connect() as conn:
        held = conn.execute(text("SELECT hash FROM chain WHERE seq = :s"), {"s": size})
        link = held.scalar_one_or_none()
    if signed.hash is None or link != signed.hash:
        raise CheckpointError(
            f"{problem} names a link the chain does not hold at seq {size}.", hint=hint
        )
    return signed.hash
