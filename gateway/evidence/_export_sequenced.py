"""The offline verify's checks of an export's format-2 part (audit.sequenced).

    era = Era.of_head(head_record)             # from the signed EXPORT event's data
    checks = SequencedChecks(era, record_keys, integrator_keys, unfiltered=True, defect=...)
    checks.signature(record, seq, what)        # per record: format-1 or format-2 signature
    checks.row(line, seq, record, follows)     # per record, in file order: links, checkpoints

From ``sequenced_from`` on, a record stands alone: ``prev_hash`` is empty, ``hash`` is
``sha256(body)`` and its signature names the log's ``store_id`` (both recorded in the
EXPORT event, which is signed). Its place in the chain is its link (``link_prev``,
``link``): ``link = sha256(link_prev ‖ hash)``, and a record that follows the previous seq
follows its link (the last format-1 event's hash at the first format-2 seq, the genesis
value for a log born in format 2). A record the EXPORT event says was linked
(``linked_seq``) must carry its link; a pending one has none, and none may be linked after
it. A record at an integrator checkpoint's size carries that checkpoint: of this log, of
this seq and link, signed by an integrator key (never a record key), and, in an unfiltered
export, with the Merkle root of the exported events 1..size, folded as the walk goes. The
integrator keys sign voids and checkpoints only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from audit.errors import CheckpointError
from audit.proofs import checkpoint as cp
from audit.proofs.frontier import Frontier, FrontierError
from audit.sequenced.export_chain import CHECKPOINT_KEY
from audit.store.chain import GENESIS
from audit.store.models import EventKind
from audit.store.sequenced import chain_link
from audit.store.signing import SEQUENCED_PREV, TrustedKeys

Report = Callable[[int, int | None, str, str], None]  # line, seq, kind, detail


class Era(NamedTuple):
    """What the EXPORT event recorded of a format-2 log (all None: a format-1 export)."""

    sequenced_from: int | None = None
    store_id: str | None = None
    linked_seq: int = 0

    @classmethod
    def of_data(cls, data: dict[str, Any]) -> Era:
        era, store, linked = (
            data.get("sequenced_from"),
            data.get("store_id"),
            data.get("linked_seq"),
        )
        if not isinstance(era, int) or isinstance(era, bool) or era < 1:
            return cls()
        return cls(
            era,
            store if isinstance(store, str) else None,
            linked if isinstance(linked, int) and not isinstance(linked, bool) else 0,
        )


class SequencedChecks:
    def __init__(
        self,
        era: Era,
        keys: TrustedKeys,
        integrators: TrustedKeys,
        *,
        unfiltered: bool,
        defect: Report,
    ) -> None:
        self.era = era
        self.keys = keys
        self.integrators = integrators
        self._defect = defect
        # The tree of the exported events 1..n, for checkpoint roots: an unfiltered export
        # only (a filtered one does not hold every leaf); None once it cannot be folded.
        self.edge: Frontier | None = Frontier() if unfiltered else None
        self.last_link: str | None = GENESIS  # what the next seq's link_prev must be
        self.pending = 0
        self.voids = 0
        self.checkpoints = 0
        self.roots = 0

    def sequenced(self, seq: int | None) -> bool:
        era = self.era.sequenced_from
        return era is not None and seq is not None and seq >= era

    def signature(self, line: int, record: dict[str, Any], seq: int | None, what: str) -> None:
        """The record signature: from ``sequenced_from`` on, under the format-2 domain and
        the log's store id, and by an integrator key only on a void."""
        stored = str(record["hash"])
        kid, signature = record.get("key_id"), record.get("signature")
        sequenced = self.sequenced(seq)
        keys = self.keys
        if sequenced:
            if record.get("prev_hash") != SEQUENCED_PREV:
                self._defect(
                    line, seq, "hash_mismatch", f"{what}a format-2 event carries a prev_hash"
                )
            if record.get("kind") == EventKind.VOID.value:
                self.voids += 1
                if self.integrators.knows(kid):
                    keys = self.integrators
            elif self.integrators.knows(kid):
                self._defect(
                    line, seq, "untrusted_signer",
                    f"{what}it is signed by an integrator key, which may sign only voids and "
                    "checkpoints",
                )  # fmt: skip
                return
        problem = keys.check(
            kid, signature, stored, sequenced=sequenced, store_id=self.era.store_id
        )
        if problem is None:
            return
        if signature is None:
            kind = "unsigned"
        elif keys.knows(kid):
            kind = "bad_signature"
        else:
            kind = "untrusted_signer"
        self._defect(line, seq, kind, f"{what}{problem}")

    def row(self, line: int, seq: int, record: dict[str, Any], follows: bool) -> None:
        """One record in file order; ``follows``: the previous record is seq - 1."""
        stored = str(record.get("hash"))
        if self.edge is not None:
            try:
                self.edge.add_hash(seq, stored)
            except FrontierError:
                self.edge = None  # a gap or a bad hash: a defect of its own already
        if not self.sequenced(seq):
            self.last_link = stored  # a format-1 event: the first format-2 link starts here
            return
        # What link_prev must be: the previous record's link (None: it has none), the genesis
        # value at seq 1; not known when the previous seq is not in the export.
        expected: str | None = self.last_link if follows else GENESIS
        checkable = follows or seq == 1
        prev, link = record.get("link_prev"), record.get("link")
        if link is None:
            self.pending += 1
            if seq <= self.era.linked_seq:
                self._defect(
                    line, seq, "broken_link",
                    f"seq {seq} was linked when it was exported (up to seq "
                    f"{self.era.linked_seq}), but its record carries no link",
                )  # fmt: skip
            if CHECKPOINT_KEY in record:
                self._defect(line, seq, "checkpoint", "an integrator checkpoint on an unlinked seq")
            self.last_link = None
            return
        if not isinstance(prev, str) or not isinstance(link, str):
            self._defect(line, seq, "bad_record", "link_prev and link must be text")
            self.last_link = None
            return
        if link != chain_link(prev, stored):
            self._defect(line, seq, "hash_mismatch", "its link is not sha256(link_prev ‖ hash)")
        elif checkable:
            if expected is None:
                self._defect(line, seq, "broken_link", "it is linked after a seq that is not")
            elif prev != expected:
                self._defect(line, seq, "broken_link", "its link does not follow the previous one")
        self.last_link = link
        if CHECKPOINT_KEY in record:
            self._checkpoint(line, seq, link, record[CHECKPOINT_KEY])

    def _checkpoint(self, line: int, seq: int, link: str, carried: Any) -> None:
        self.checkpoints += 1
        try:
            signed = cp.loads(carried if isinstance(carried, str) else json.dumps(carried))
        except (CheckpointError, TypeError, ValueError) as exc:
            why = exc.message if isinstance(exc, CheckpointError) else str(exc)
            self._defect(line, seq, "checkpoint", f"the integrator's checkpoint: {why}")
            return
        if signed.store_id != self.era.store_id:
            self._defect(line, seq, "checkpoint", "the integrator's checkpoint is of another log")
        elif signed.seq != seq or signed.tree_size != seq or signed.hash != link:
            self._defect(line, seq, "checkpoint", "the integrator's checkpoint names another head")
        elif signed.public_key not in self.integrators:
            who = "a record key" if signed.public_key in self.keys else "an untrusted key"
            self._defect(
                line, seq, "checkpoint",
                f"the integrator's checkpoint is signed by {who}: only an integrator key "
                "(--integrator-public-key) may sign one",
            )  # fmt: skip
        elif self.edge is not None and self.edge.size == seq:
            self.roots += 1
            if signed.root != cp.b64(self.edge.root()):
                self._defect(
                    line, seq, "checkpoint",
                    "the integrator's checkpoint root is not the Merkle root of the exported "
                    f"events 1..{seq}",
                )  # fmt: skip
