"""Verify's check of the format-2 integrator's checkpoints, as its walk reaches each size.

    checks = CheckpointChecks(trust, latest_size, defect, held=file_checkpoint)
    checks.load(conn, after, upto)          # the checkpoints of a page's seqs
    checks.at(seq, link, root)              # the walk linked ``seq``: root is its tree's
    checks.finish(conn, after)              # any left are of seqs the walk never linked

Every row of ``chain_checkpoints`` up to the latest one (read in the same snapshot as the
log's head, so one written during the walk is not expected) must name the link the walk
computed at its size and the RFC 6962 root of events 1..size that the walk folded from the
events' own hashes (audit.proofs.frontier), and be signed by an integrator key: never a record
key, so no gateway host can sign a tree head. A checkpoint above the walk's linked head
names links or events that are gone: the log was truncated.

``held`` is the checkpoint file an auditor kept outside the database (`audit verify
--checkpoint FILE`, of a format-2 seq: :func:`split_checkpoint`): the link the walk computed
at its seq must be the file's ``hash`` and the root it folded of events 1..seq the file's
``root``. A rewritten event at or below it changes both (its leaf, and every link from it
on), a log that forked from this one has other links, and a truncated one never reaches the
seq. Its signature was checked, and its signer pinned, before the walk (gateway.evidence).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, text

from audit.errors import CheckpointError
from audit.proofs import checkpoint as cp
from audit.store.models import Checkpoint, DefectKind
from audit.store.signing import Trust

Report = Callable[[int | None, DefectKind, str], None]


HELD_REWRITTEN = "the link at this seq differs from the checkpoint's: log rewritten or forked"


def split_checkpoint(
    checkpoint: Checkpoint | None, era: int | None
) -> tuple[Checkpoint | None, Checkpoint | None]:
    """(the format-1 walk's checkpoint, the format-2 walk's): a checkpoint of a seq before
    ``era`` (the first format-2 seq) names an event's hash, which the format-1 walk checks;
    one at or after it names a link (a format-2 `audit checkpoint`), which only the
    format-2 walk computes."""
    if checkpoint is None or era is None or checkpoint.seq < era:
        return checkpoint, None
    return None, checkpoint


class CheckpointChecks:
    def __init__(
        self,
        trust: Trust | None,
        latest: int,
        defect: Report,
        *,
        held: Checkpoint | None = None,
    ) -> None:
        self._trust = trust
        self._latest = latest  # the snapshot's latest checkpoint size (0: none)
        self._defect = defect
        self._due: dict[int, Any] = {}
        self.checked = 0
        self.held = held  # the auditor's checkpoint file, of a format-2 seq
        self.held_seen = False
        self.held_root_checked = False

    def load(self, conn: Connection, after: int, upto: int) -> None:
        """The checkpoints of sizes ``after < size <= upto`` (and not above the latest)."""
        upto = min(upto, self._latest)
        if upto <= after:
            return
        rows = conn.execute(
            text(
                "SELECT size, root, chain_head, checkpoint FROM chain_checkpoints "
                "WHERE size > :a AND size <= :b ORDER BY size"
            ),
            {"a": after, "b": upto},
        )
        self._due.update({int(r.size): r for r in rows})

    def at(self, seq: int, link: str, root: bytes | None) -> None:
        """The walk linked ``seq`` (``link``); ``root``: its tree's, None if it could not be
        folded (a defect already says why)."""
        if self.held is not None and seq == self.held.seq:
            self._held_at(seq, link, root)
        row = self._due.pop(seq, None)
        if row is None:
            return
        self.checked += 1
        if row.chain_head != link:
            self._defect(
                seq, DefectKind.CHECKPOINT, "the integrator's checkpoint is not of this chain"
            )
            return
        if root is not None and row.root != root.hex():
            self._defect(
                seq,
                DefectKind.CHECKPOINT,
                "the integrator's checkpoint root is not the Merkle root of the log's events",
            )
            return
        try:
            signed = cp.loads(str(row.checkpoint))
        except CheckpointError as exc:
            self._defect(seq, DefectKind.CHECKPOINT, f"the integrator's checkpoint: {exc.message}")
            return
        if signed.hash != row.chain_head or signed.seq != seq or signed.tree_size != seq:
            self._defect(
                seq, DefectKind.CHECKPOINT, "the integrator's checkpoint names another head"
            )
        elif signed.root != (cp.b64(bytes.fromhex(row.root)) if _is_hex(row.root) else None):
            self._defect(
                seq, DefectKind.CHECKPOINT, "the integrator's signed root is not its row's"
            )
        else:
            self._signer(seq, signed.public_key)

    def _held_at(self, seq: int, link: str, root: bytes | None) -> None:
        held = self.held
        assert held is not None
        self.held_seen = True
        if held.hash is not None and link != held.hash:
            self._defect(seq, DefectKind.CHECKPOINT, HELD_REWRITTEN)
            return
        if held.root is None:  # a version 1 file: its link fixes every hash under it
            return
        self.held_root_checked = True
        if root is None:
            self._defect(
                seq,
                DefectKind.CHECKPOINT,
                f"the Merkle root of events 1..{seq} cannot be recomputed (a defect below "
                "it says why), so the checkpoint's root is not confirmed",
            )
        elif cp.b64(root) != held.root:
            self._defect(
                seq,
                DefectKind.CHECKPOINT,
                f"the Merkle root of events 1..{seq} is not the checkpoint's: log rewritten",
            )

    def _signer(self, seq: int, public_key: str | None) -> None:
        trust = self._trust
        if trust is None:
            return
        integrators = trust.integrator
        if integrators is not None and public_key in integrators:
            return
        if public_key in trust.keys:
            detail = (
                "the integrator's checkpoint is signed by a record key: only an integrator "
                "key (GATEWAY_INTEGRATOR_PUBLIC_KEYS) may sign one"
            )
        else:
            detail = (
                "the integrator's checkpoint is signed by an untrusted key (set "
                "GATEWAY_INTEGRATOR_PUBLIC_KEYS to the integrator's public key)"
            )
        self._defect(seq, DefectKind.CHECKPOINT, detail)

    def finish(self, conn: Connection, after: int, linked_head: int) -> None:
        """Report every checkpoint the walk did not reach as a linked seq."""
        self.load(conn, after, self._latest)
        for size in sorted(self._due):
            if size > linked_head:
                detail = (
                    f"the integrator's checkpoint names seq {size}, but the linked chain ends "
                    f"at seq {linked_head}: events or links were removed (truncation)"
                )
            else:
                detail = f"the integrator's checkpoint names seq {size}, which is not linked"
            self._defect(size, DefectKind.CHECKPOINT, detail)
        self._due.clear()
        held = self.held
        if held is not None and not self.held_seen:
            if held.seq > linked_head:
                detail = (
                    f"the linked chain ends at seq {linked_head} but the checkpoint names seq "
                    f"{held.seq}: events or links were removed (truncation or rollback)"
                )
                self._defect(linked_head + 1, DefectKind.CHECKPOINT, detail)
            else:
                detail = f"the event at seq {held.seq} named by the checkpoint is not linked"
                self._defect(held.seq, DefectKind.CHECKPOINT, detail)


def _is_hex(value: object) -> bool:
    try:
        return isinstance(value, str) and len(bytes.fromhex(value)) == 32
    except ValueError:
        return False
