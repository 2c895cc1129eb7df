"""The format-2 integrator: link committed events in seq order, extend the tree, checkpoint.

    integrator = Integrator(store, key, grace_s=30)
    integrator.step()                      # one pass: returns what it did (Step)
    integrator.run(interval_s=1, stop=event)

Writers commit format-2 events that stand alone (audit.store._sequenced_append); this links them.
One pass reads the events above the linked head in seq order, keeps the contiguous prefix,
and in one transaction inserts one ``chain`` row per event, ``hash = sha256(prev ‖ event
hash)``, the first link's ``prev`` the last format-1 event's hash (the genesis value for a
log that began in format 2). It then every ``checkpoint_every_s``, extends the stored
Merkle tree (audit.proofs.merkle_store, leaves from the events' own hashes, as for format 1) and
inserts a checkpoint of the linked prefix signed with the integrator's key. Passes come
every ``interval_s`` unless a pass found a full page (a backlog): a steady stream is linked
in batches, so the lag is about ``interval_s``.

A seq that is reserved but has no row is a writer in flight, or one that died after
``nextval``. The pass notes the highest seq reserved when it first sees the hole; once the
hole has stayed for ``grace_s``, every missing seq up to that bound is voided (a page of
``VOID_PAGE`` a pass, so a flood of reserved seqs costs time, not memory), signed with
the integrator's key (``ON CONFLICT DO NOTHING``: a writer's row committed meanwhile wins,
and a writer that commits after its void fails on the primary key and fails closed). The
grace must exceed a writer's ``statement_timeout`` plus ``idle_in_transaction_session_timeout``.
The database holds the integrator role to a grace of its own (migration 0011): the pass has
it mark how far the sequence has gone (``audit_mark_reserved()``) when it first sees a hole,
and a void from that role is let in only once such a mark covers the seq and is older than
``audit_void_grace()``; a refused void is waited out like the grace.

The pass starts from the linked head it has checked itself: each link above it (another
integrator's) must follow the last and be ``sha256(prev ‖ its event's hash)``, or the pass
stops with :class:`IntegrationBlocked` (a planted row above the prefix would otherwise make
it link nothing, silently and for good). The roots it signs come from its own frontier of
the events it links (audit.proofs.frontier), never from ``merkle_nodes``.

Two integrators at once are safe without a lease: the links are a function of the committed
rows, so both compute the same ones, and the primary keys of ``chain`` and
``chain_checkpoints`` let one insert each; the other's transaction rolls back (a lost race,
:attr:`Step.lost` counts them) and its next pass starts from the new head.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, insert, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import IntegrityError, ProgrammingError, SQLAlchemyError

from audit.canonical import canonical_bytes
from audit.errors import AuditStoreError, LogFormatUnsupported
from audit.proofs import checkpoint as cp
from audit.proofs.frontier import Frontier
from audit.proofs.merkle_store import MerkleState, MerkleStateError
from audit.store import AuditStore
from audit.store.chain import GENESIS
from audit.store.schema import CHAIN, CHAIN_CHECKPOINTS, EVENTS
from audit.store.sequenced import chain_link, void_row
from audit.store.signing import Signer

PAGE = 20_000  # events linked per transaction
DEFAULT_GRACE_S = 30.0
DEFAULT_CHECKPOINT_EVERY_S = 5.0
VOID_PAGE = 5_000  # voids built, signed and inserted per transaction (bounded memory)
# Far more seqs reserved than linked: a writer (any role with USAGE on events_seq) is
# reserving seqs it never commits; each costs the integrator a signed void.
RESERVED_AHEAD_WARN = 100_000
INSUFFICIENT_PRIVILEGE = "42501"  # a row policy refusing the integrator role's void
KEPT_WARNINGS = 20  # warnings a run's totals keep (each one is also passed on as it comes)


class IntegrationBlocked(AuditStoreError):
    """The chain holds a row this integrator cannot link past: a link above the linked
    prefix, or one that is not sha256(previous link ‖ its event's hash). Only the tables'
    owner can remove it (chain is append-only); integrating around it would fork the chain."""


BLOCKED_HINT = (
    "Run `gateway audit verify`: the chain holds a row no integrator made. The tables' owner "
    "must remove it (docs/audit.md, format 2) before integration can go on."
)


@dataclass(frozen=True)
class Step:
    """What one pass did (or passes, summed): events linked, seqs voided, a checkpoint
    written, races lost to another integrator."""

    linked: int = 0
    voided: int = 0
    checkpoint: int | None = None  # its size
    lost: int = 0
    head: int = 0  # the linked head after the pass
    waiting_on: int | None = None  # a hole at this seq, inside its grace
    warnings: tuple[str, ...] = ()  # for the operator: the integrator goes on regardless


class Integrator:
    def __init__(
        self,
        store: AuditStore,
        key: bytes,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S,
        page: int = PAGE,
    ) -> None:
        if store.sequenced_from is None:
            raise LogFormatUnsupported(
                "this audit log is in format 1: there is nothing to integrate.",
                hint="Set GATEWAY_AUDIT_FORMAT=2 (PostgreSQL) to begin format 2.",
            )
        self._store = store
        self._store_id = store.store_id
        self._backend = store.backend
        self._era = store.sequenced_from
        self._key = key
        self._signer = Signer.from_text(key.hex())
        self.public_key = self._signer.public_key
        self._grace_s = grace_s
        self._every_s = checkpoint_every_s
        self._page = page
        self._durability = canonical_bytes(self._backend.durability)
        self._stall: tuple[float, int, int] | None = None  # (since, at seq, void up to)
        self._cleared = 0  # seqs up to here have waited out their grace: void them page by page
        self._last_checkpoint = 0.0
        # The largest size up to the linked head a checkpoint is stored for (None: not read
        # yet), so an idle pass signs a head no checkpoint covers (linked by a run that died).
        self._signed: int | None = None
        self._tree = MerkleState(self._backend)
        # The right edge of the tree of the linked prefix, from the event hashes this
        # integrator links: the roots it signs come from here, never from merkle_nodes.
        self._edge: Frontier | None = None
        # The linked head (seq, link) this integrator has checked, link by link, against the
        # events: None until the first pass finds it.
        self._linked: tuple[int, str] | None = None

    # -- one pass -----------------------------------------------------------------------------

    def step(self) -> Step:
        with self._backend.writer.connect() as conn:
            head, prev = self._head(conn)
            rows = conn.execute(
                text(
                    "SELECT seq, hash FROM events WHERE seq > :h ORDER BY seq LIMIT :n"
                ).bindparams(h=head, n=self._page)
            ).all()
            reserved = int(conn.execute(text("SELECT audit_seq_reserved()")).scalar_one())
            conn.rollback()
        links: list[dict[str, Any]] = []
        for seq, event_hash in rows:
            if seq != head + 1 + len(links):
                break
            link = chain_link(prev, str(event_hash))
            links.append({"seq": seq, "prev_hash": prev, "hash": link})
            prev = link
        if not links:
            if reserved <= head:
                self._stall = None
                signed, said = self._sign_uncovered(head, prev)
                return Step(head=head, checkpoint=signed, warnings=said)
            return self._hole(head, rows[0][0] - 1 if rows else reserved, reserved)
        self._stall = None
        try:
            with self._backend.writer.begin() as conn:
                for at in range(0, len(links), 5_000):
                    conn.execute(insert(CHAIN), links[at : at + 5_000])
        except IntegrityError:
            return Step(lost=1, head=head)  # another integrator linked these first
        self._linked = (links[-1]["seq"], links[-1]["hash"])
        edge = self._edge
        if edge is not None and edge.size == head:
            for seq, event_hash in rows[: len(links)]:
                edge.add_hash(int(seq), str(event_hash))
        size = links[-1]["seq"]
        made = None
        warnings: tuple[str, ...] = ()
        if time.monotonic() - self._last_checkpoint >= self._every_s:
            made, warnings = self._checkpoint(size, links[-1]["hash"])
        return Step(linked=len(links), checkpoint=made, head=size, warnings=warnings)

    def _head(self, conn: Connection) -> tuple[int, str]:
        """The last linked seq and its link (before any, the last format-1 event's hash),
        each link above the one last checked checked against its event:
        :class:`IntegrationBlocked` if one does not follow, or stands above a missing one.
        Not the highest chain row, unchecked: a row planted far ahead would make every
        pass start there and link nothing, for good and without a word."""
        if self._linked is None:
            self._linked = self._checked_prefix(conn)
        head, prev = self._linked
        while True:
            rows = conn.execute(
                text(
                    "SELECT c.seq, c.prev_hash, c.hash, e.hash AS event FROM chain c "
                    "LEFT JOIN events e ON e.seq = c.seq WHERE c.seq > :h ORDER BY c.seq "
                    "LIMIT :n"
                ).bindparams(h=head, n=self._page)
            ).all()
            edge = self._edge
            for seq, link_prev, link, event in rows:
                if seq != head + 1:
                    raise self._blocked(seq, f"it stands above the linked prefix (seq {head})")
                if link_prev != prev or event is None or link != chain_link(prev, str(event)):
                    raise self._blocked(seq, "it is not sha256(previous link ‖ its event's hash)")
                if edge is not None and edge.size == head:
                    edge.add_hash(seq, str(event))
                head, prev = seq, str(link)
            self._linked = (head, prev)
            if len(rows) < self._page:
                return head, prev

    def _checked_prefix(self, conn: Connection) -> tuple[int, str]:
        """Where the first pass starts: the end of the contiguous run of links from the
        era's first seq, its last link checked against its event (the links above it are
        checked as :meth:`_head` reads on)."""
        start = self._start(conn)
        low, high, count = conn.execute(
            text("SELECT min(seq), max(seq), count(*) FROM chain")
        ).one()
        if not count or low != self._era:
            return start  # nothing linked, or rows below/above the era only: _head says so
        if int(high) - self._era + 1 == int(count):
            end = int(high)
        else:  # a gap: O(links) once, at start; every pass after reads only new links
            end = int(
                conn.execute(
                    text(
                        "SELECT c.seq FROM chain c WHERE c.seq >= :era AND NOT EXISTS "
                        "(SELECT 1 FROM chain d WHERE d.seq = c.seq + 1) ORDER BY c.seq LIMIT 1"
                    ).bindparams(era=self._era)
                ).scalar_one()
            )
        row = conn.execute(
            text(
                "SELECT c.prev_hash, c.hash, e.hash AS event, p.hash AS before FROM chain c "
                "LEFT JOIN events e ON e.seq = c.seq LEFT JOIN chain p ON p.seq = c.seq - 1 "
                "WHERE c.seq = :s"
            ).bindparams(s=end)
        ).one()
        expected_prev = start[1] if end == self._era else row.before
        if (
            row.prev_hash != expected_prev
            or row.event is None
            or row.hash != chain_link(str(row.prev_hash), str(row.event))
        ):
            raise self._blocked(end, "it is not sha256(previous link ‖ its event's hash)")
        return end, str(row.hash)

    def _start(self, conn: Connection) -> tuple[int, str]:
        if self._era == 1:
            return 0, GENESIS
        last = conn.execute(
            text("SELECT hash FROM events WHERE seq = :s").bindparams(s=self._era - 1)
        ).scalar_one()
        return self._era - 1, str(last)

    def _blocked(self, seq: int, why: str) -> IntegrationBlocked:
        return IntegrationBlocked(
            f"the chain's row at seq {seq} cannot be linked past: {why}.", hint=BLOCKED_HINT
        )

    def _hole(self, head: int, bound: int, reserved: int) -> Step:
        warnings: tuple[str, ...] = ()
        if reserved - head > RESERVED_AHEAD_WARN:
            warnings = (
                f"{reserved - head} seqs are reserved past the linked head (seq {head}) but "
                "not committed: a writer is reserving seqs it does not use; each is voided",
            )
        if head + 1 > self._cleared:
            now = time.monotonic()
            stall = self._stall
            if stall is None or stall[1] != head + 1:
                self._mark_reserved()
                self._stall = (now, head + 1, bound)
                return Step(head=head, waiting_on=head + 1, warnings=warnings)
            if now - stall[0] < self._grace_s:
                return Step(head=head, waiting_on=head + 1, warnings=warnings)
            # Every seq up to the bound was reserved before the hole was first seen, so its
            # writer has had the whole grace to commit.
            self._cleared = stall[2]
            self._stall = None
        # One page a pass (the passes go on straight away after a void), so memory stays
        # bounded however many seqs were reserved.
        upto = min(self._cleared, bound, head + VOID_PAGE)
        reason = f"not committed within {self._grace_s:g} s"
        stamp = datetime.now(UTC)
        voids = [
            void_row(s, self._signer, reason, self._durability, stamp, store_id=self._store_id)
            for s in range(head + 1, upto + 1)
        ]
        # RETURNING counts the rows written: an executemany's rowcount is not reliable.
        statement = postgresql.insert(EVENTS).on_conflict_do_nothing().returning(EVENTS.c.seq)
        try:
            with self._backend.writer.begin() as conn:
                written = len(conn.execute(statement, voids).all())
        except ProgrammingError as exc:
            if getattr(exc.orig, "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
                raise
            # The database's own grace (audit_void_grace(), from its marks) is longer than
            # this integrator's: wait for it, and mark again in case no mark covers the hole.
            self._mark_reserved()
            refused = (
                f"the database refused to void seqs {head + 1}..{upto} yet: it lets the "
                "integrator role void a seq only audit_void_grace() after it saw it reserved",
            )
            return Step(head=head, waiting_on=head + 1, warnings=warnings + refused)
        return Step(head=head, voided=written, warnings=warnings)

    def _mark_reserved(self) -> None:
        """Have the database note how far ``events_seq`` has handed out seqs, and when
        (migration 0011): the integrator role's voids are let in only once a mark at or
        above them is older than the database's grace."""
        with self._backend.writer.begin() as conn:
            conn.execute(text("SELECT audit_mark_reserved()"))

    # -- checkpoints --------------------------------------------------------------------------

    def checkpoint(self, size: int, chain_head: str) -> int | None:
        """Sign the linked prefix 1..``size`` (its RFC 6962 root and last link) and store it;
        None if another integrator stored that size first."""
        return self._checkpoint(size, chain_head)[0]

    def root(self, size: int) -> bytes:
        """The RFC 6962 root of events 1..``size`` from this integrator's own frontier,
        caught up from the log's hash column when another integrator linked meanwhile (or
        rebuilt, once, when this one starts)."""
        edge = self._edge
        if edge is None or edge.size > size:
            edge = self._edge = Frontier()
        edge.extend_from_log(self._backend.reader, size)
        return edge.root()

    def _sign_uncovered(self, head: int, link: str) -> tuple[int | None, tuple[str, ...]]:
        """Nothing to link: sign the linked head if no stored checkpoint covers it, or a
        receipt for its last events would wait for the next event to arrive."""
        if head < self._era or (self._signed or 0) >= head:
            return None, ()
        # Not above the head: a row planted far ahead must not pass for this head's.
        with self._backend.reader.connect() as conn:
            top = conn.execute(
                text("SELECT max(size) FROM chain_checkpoints WHERE size <= :h"), {"h": head}
            ).scalar()
        self._signed = int(top or 0)
        if self._signed >= head:
            return None, ()
        return self._checkpoint(head, link)

    def _checkpoint(self, size: int, chain_head: str) -> tuple[int | None, tuple[str, ...]]:
        root = self.root(size)
        warnings = self._extend_stored_tree(size, root)
        made_at = datetime.now(UTC)
        signed = cp.sign(self._store.store_id, size, chain_head, made_at, self._key, root=root)
        row = {
            "size": size,
            "root": root.hex(),
            "chain_head": chain_head,
            "made_at": made_at,
            "checkpoint": cp.dumps(signed),
        }
        statement = postgresql.insert(CHAIN_CHECKPOINTS).on_conflict_do_nothing()
        with self._backend.writer.begin() as conn:
            written = conn.execute(statement, [row]).rowcount
        self._last_checkpoint = time.monotonic()
        self._signed = max(self._signed or 0, size)  # by this integrator or the one that won
        return (size if written else None), warnings

    def _extend_stored_tree(self, size: int, root: bytes) -> tuple[str, ...]:
        """Extend merkle_nodes (what receipts and tree-head read, O(log n) a proof) a
        checkpoint's worth at a time. Best effort: a planted or missing node must neither
        change the root signed nor stop the checkpoints, so it is only reported."""
        try:
            self._tree.extend(size)
            stored = self._tree.root(size)
        except (MerkleStateError, SQLAlchemyError) as exc:
            reason = exc.message if isinstance(exc, MerkleStateError) else type(exc).__name__
            return (f"the stored Merkle tree could not be extended to {size}: {reason}",)
        if stored != root:
            return (
                f"the stored Merkle tree's root at {size} is not the root of the log's "
                "events: merkle_nodes holds a planted or altered node; run `gateway audit "
                "tree-head --rebuild` as the tables' owner",
            )
        return ()

    # -- the loop -----------------------------------------------------------------------------

    def run(
        self,
        interval_s: float,
        stop: threading.Event,
        *,
        once: bool = False,
        on_warning: Callable[[str], None] | None = None,
    ) -> Step:
        """Pass after pass until ``stop`` is set (``once``: until nothing is left to do, a
        hole inside its grace included); sleeps ``interval_s`` when a pass did nothing.
        Returns the totals, with the first :data:`KEPT_WARNINGS` warnings; ``on_warning``
        hears each one as it comes (a long run must not hold them all)."""
        linked = voided = lost = 0
        made: int | None = None
        warnings: dict[str, None] = {}  # the first few, each once, in order
        last = Step()

        def warn(found: tuple[str, ...]) -> None:
            for warning in found:
                if on_warning is not None:
                    on_warning(warning)
                if len(warnings) < KEPT_WARNINGS:
                    warnings[warning] = None

        while not stop.is_set():
            last = self.step()
            warn(last.warnings)
            linked += last.linked
            voided += last.voided
            lost += last.lost
            made = last.checkpoint if last.checkpoint is not None else made
            busy = last.linked or last.voided or last.lost
            if once and not busy and last.waiting_on is None:
                break
            # Straight on only with a backlog (a full page) or after a void or a lost race:
            # otherwise a pass per interval, so a steady stream is linked in batches and the
            # integrator does not compete with the writers for the CPU pass after pass.
            if last.linked < self._page and not last.voided and not last.lost:
                stop.wait(interval_s)
        if linked and (made is None or made < last.head):  # the head, signed before leaving
            with self._backend.writer.connect() as conn:
                head, prev = self._head(conn)
            final, more = self._checkpoint(head, prev)
            made = final or made
            warn(more)
        return Step(
            linked=linked,
            voided=voided,
            checkpoint=made,
            lost=lost,
            head=last.head,
            warnings=tuple(warnings),
        )
