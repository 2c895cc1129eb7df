"""Verify's walk of a format-2 log's events (audit.store.sequenced), after the format-1 walk.

    census = format_1_census(backend, census, era)     # the format-1 walk stops before era
    report = verify_sequenced(backend, era, trust, report)

From the first format-2 seq on, each row is checked on its own: ``prev_hash`` is ``''`` and
``hash`` is ``sha256(body)``, the columns agree with the body, the referenced content is
stored intact, the record signature (format-2 domain) is a trusted key's, and each
request's life is checked as the format-1 walk checks it (audit.verify.lifecycle, carrying on the
format-1 walk's open intents, so an outcome or a reference may reach back into the format-1
era): each outcome follows its REQUEST and ends it once, and what a CACHE_HIT, REPLAY or
INTEGRITY_ALERT names by seq is an earlier event, linked or pending, of the kind, request
and hash it claims. Its link, when the integrator has made it, must be
``sha256(previous link ‖ hash)`` from the last format-1 event's hash on, and the linked
events must be a prefix: nothing linked after a seq that is not. The events after that
prefix are *pending integration*: checked the same way, counted, their oldest time
reported; a missing seq among them is a writer in flight or a hole the integrator will void,
not a defect. A missing seq inside the linked prefix, or a link without its event, is.
Every integrator checkpoint must name the link at its size and the Merkle root of events
1..size, which the walk folds from the events' own hashes as it goes (audit.proofs.frontier;
the stored tree is not read), and be signed by an integrator key
(audit.verify._sequenced_checkpoints). A chain row above the linked prefix, a checkpoint above it
(truncation) and a pending tail older than ``stalled_after_s`` are defects too. So is a
checkpoint file of a format-2 seq (``checkpoint``: `audit verify --checkpoint FILE`) whose
link or root the walk does not find at its seq, or a seq the linked chain no longer reaches.

Signatures: an integrator key (``Trust.integrator``) is accepted on void events only, a
record key on any event (a writer voids its own seqs after a rollback) but never on a
checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, text

from audit.canonical import digest
from audit.proofs.frontier import Frontier, FrontierError
from audit.store.backend import Backend
from audit.store.chain import GENESIS, MAX_DEFECTS, MIRRORED, Census, as_bytes
from audit.store.models import (
    Checkpoint,
    Defect,
    DefectKind,
    EventKind,
    TrustedKeyInfo,
    VerifyReport,
)
from audit.store.sequenced import chain_link
from audit.store.signing import SEQUENCED_PREV, Trust
from audit.verify._erasures import erased_at, erased_problem
from audit.verify._sequenced_checkpoints import CheckpointChecks
from audit.verify.body import parse_body, parse_time
from audit.verify.lifecycle import INTENT_KINDS, Lifecycle, Target

PAGE = 5000
DEFAULT_STALLED_AFTER_S = 600.0  # a pending tail older than this: the integrator is stopped
_ROWS = (
    "SELECT e.seq, e.request_id, e.kind, e.recorded_at, e.task, e.caller, "
    "e.policy_fingerprint, e.request_hash, e.event_id, e.body, e.prev_hash, e.hash, "
    "e.signature, e.key_id, c.prev_hash AS link_prev, c.hash AS link "
    "FROM events e LEFT JOIN chain c ON c.seq = e.seq "
    "WHERE e.seq >= :era AND e.seq > :last ORDER BY e.seq LIMIT :n"
)


def format_1_census(backend: Backend, census: Census, era: int) -> Census:
    """The census of the format-1 rows only (seq < ``era``), for the format-1 walk."""
    with backend.reader.connect() as conn:
        later = int(
            conn.execute(
                text("SELECT count(*) FROM events WHERE seq >= :era"), {"era": era}
            ).scalar_one()
        )
    return census._replace(rows=census.rows - later, highest=min(census.highest, era - 1))


class _Walk:
    def __init__(
        self,
        trust: Trust | None,
        prev: str,
        era: int,
        edge: Frontier | None,
        store_id: str,
        life: Lifecycle,
    ) -> None:
        self.trust = trust
        self.life = life  # open intents only (flat memory), carried on from format 1
        self.store_id = store_id  # what each format-2 signature names
        self.edge = edge  # the tree of the linked prefix; None once it cannot be folded
        self.prev = prev  # the last link
        self.expected = era
        self.linked_head = era - 1
        self.linking = True  # still inside the linked prefix
        self.count = 0
        self.bytes = 0
        self.pending = 0
        self.voids = 0
        self.pending_since: datetime | None = None
        self.erased: dict[str, int] = {}  # the page's content gone under an erasure: its seq
        self.defects: list[Defect] = []
        self.checks = CheckpointChecks(trust, 0, self.defect)

    def defect(self, seq: int | None, kind: DefectKind, detail: str) -> None:
        if len(self.defects) < MAX_DEFECTS:
            self.defects.append(Defect(seq=seq, kind=kind, detail=detail))

    def row(self, r: Any, intact: set[str]) -> None:
        seq = int(r.seq)
        if seq != self.expected and r.link is not None:
            # Linked past a missing seq: an event was deleted (pending seqs may be missing:
            # a writer in flight, or a hole the integrator will void).
            gap = f"seq {self.expected}" + (f"..{seq - 1}" if seq - 1 > self.expected else "")
            self.defect(self.expected, DefectKind.GAP, f"{gap} is missing from the linked chain")
        self.expected = seq + 1
        self.count += 1
        if r.kind == EventKind.VOID.value:
            self.voids += 1
        body = as_bytes(r.body)
        self.bytes += len(body)
        if r.prev_hash != SEQUENCED_PREV:
            self.defect(seq, DefectKind.HASH_MISMATCH, "a format-2 event carries a prev_hash")
        if r.hash != digest(body):
            self.defect(seq, DefectKind.HASH_MISMATCH, "its hash is not sha256(body)")
        self._body(seq, r, body, intact)
        self._signature(seq, r)
        self._link(seq, r)

    def _body(self, seq: int, r: Any, body: bytes, intact: set[str]) -> None:
        parsed = parse_body(body)
        if isinstance(parsed, str):
            self.defect(seq, DefectKind.BAD_BODY, parsed)
            return
        wrong = [c for c in MIRRORED if getattr(r, c) != parsed.get(c)]
        if parsed.get("seq") != seq:
            wrong.append("seq")
        try:
            if parse_time(str(parsed.get("recorded_at"))) != r.recorded_at:
                wrong.append("recorded_at")
        except ValueError:
            wrong.append("recorded_at")
        if wrong:
            self.defect(
                seq,
                DefectKind.COLUMN_MISMATCH,
                f"column(s) {', '.join(wrong)} differ from its body",
            )
        self.life.feed(seq, parsed)
        for ref in _refs(parsed):
            if ref not in intact and (gone := erased_problem(ref, seq, self.erased)):
                self.defect(seq, DefectKind.MISSING_CONTENT, gone)

    def _signature(self, seq: int, r: Any) -> None:
        if self.trust is None:
            return
        keys = self.trust.keys
        integrators = self.trust.integrator
        if integrators is not None and integrators.knows(r.key_id):
            if r.kind != EventKind.VOID.value:
                self.defect(
                    seq,
                    DefectKind.UNTRUSTED_SIGNER,
                    "it is signed by the integrator key, which may sign only voids and checkpoints",
                )
                return
            keys = integrators
        reason = keys.check(
            r.key_id, r.signature, str(r.hash), sequenced=True, store_id=self.store_id
        )
        if reason is None:
            return
        if r.signature is None:
            kind = DefectKind.UNSIGNED
        elif keys.knows(r.key_id):
            kind = DefectKind.BAD_SIGNATURE
        else:
            kind = DefectKind.UNTRUSTED_SIGNER
        self.defect(seq, kind, reason)

    def _link(self, seq: int, r: Any) -> None:
        if r.link is None:
            self.linking = False
            self.pending += 1
            when = r.recorded_at
            if self.pending_since is None or when < self.pending_since:
                self.pending_since = when
            return
        if not self.linking:
            self.defect(seq, DefectKind.BROKEN_LINK, "it is linked after a seq that is not")
            return
        if r.link_prev != self.prev:
            self.defect(seq, DefectKind.BROKEN_LINK, "its link does not follow the previous one")
        elif r.link != chain_link(self.prev, str(r.hash)):
            self.defect(seq, DefectKind.HASH_MISMATCH, "its link is not sha256(prev ‖ hash)")
        self.prev = str(r.link)
        self.linked_head = seq
        root = None
        if self.edge is not None:
            try:
                self.edge.add_hash(seq, str(r.hash))
                root = self.edge.root()
            except FrontierError:
                self.edge = None  # a gap or a bad hash: already a defect of its own
        self.checks.at(seq, self.prev, root)


def _refs(parsed: dict[str, Any]) -> list[str]:
    payloads = parsed.get("payloads") or {}
    refs = [str(v) for v in payloads.values()] if isinstance(payloads, dict) else []
    policy = parsed.get("policy_ref")
    return [*refs, str(policy)] if policy is not None else refs


def _intact(conn: Connection, refs: Iterable[str]) -> set[str]:
    """Which of ``refs`` are stored and hash to their key (payloads and policies)."""
    wanted = sorted(set(refs))
    found: set[str] = set()
    for at in range(0, len(wanted), 1000):
        chunk = wanted[at : at + 1000]
        rows = conn.execute(
            text(
                "SELECT digest, content_hash FROM audit_content_hashes(:k) UNION ALL "
                "SELECT fingerprint, 'sha256:' || encode(sha256(content), 'hex') FROM policies "
                "WHERE fingerprint = ANY(:k)"
            ),
            {"k": chunk},
        )
        # Hashed on the server (0015): no role reads content to check it.
        found.update(key for key, actual in rows if actual == key)
    return found


def _settle(conn: Connection, walk: _Walk, last_seq: int, first_defect: int) -> None:
    """After a page: look up what its events name and the lives of its unmatched outcomes
    (audit.verify.lifecycle), in the format-1 era or this one, and settle them; the page's defects
    then stand in seq order, as if each had been found at its event."""
    targets, request_ids = walk.life.wanted()
    found: dict[int, Target] = {}
    lives: list[Target] = []
    if targets:
        rows = conn.execute(text(_TARGETS), {"s": sorted(targets)})
        found = {int(r.seq): Target(*r) for r in rows}
    if request_ids:
        rows = conn.execute(
            text(_LIVES), {"ids": sorted(request_ids), "kinds": list(INTENT_KINDS), "h": last_seq}
        )
        lives = [Target(*r) for r in rows]
    for seq, kind, detail in walk.life.settle(found, lives):
        walk.defect(seq, kind, detail)
    page = walk.defects[first_defect:]
    page.sort(key=lambda d: d.seq if d.seq is not None else 0)
    walk.defects[first_defect:] = page


_TARGETS = "SELECT seq, kind, request_id, request_hash, hash FROM events WHERE seq = ANY(:s)"
_LIVES = (
    "SELECT seq, kind, request_id, request_hash, hash FROM events "
    "WHERE request_id = ANY(:ids) AND kind = ANY(:kinds) AND seq >= 1 AND seq <= :h "
    "ORDER BY seq"
)


def _start(conn: Connection, era: int) -> str:
    if era == 1:
        return GENESIS
    last = conn.execute(text("SELECT hash FROM events WHERE seq = :s"), {"s": era - 1})
    return str(last.scalar_one_or_none() or GENESIS)


# One statement, one snapshot: the log's head, the chain's top and the latest checkpoint.
_SNAPSHOT = (
    "SELECT (SELECT coalesce(max(seq), 0) FROM events) AS highest, "
    "(SELECT coalesce(max(seq), 0) FROM chain) AS chain_top, "
    "(SELECT coalesce(max(size), 0) FROM chain_checkpoints) AS latest"
)


def _edge(backend: Backend, era: int) -> Frontier | None:
    """The tree of the format-1 events (seqs before ``era``), from their hash column; None
    if they cannot be folded (the format-1 walk reports why)."""
    try:
        return Frontier.of_log(backend.reader, era - 1)
    except FrontierError:
        return None


def verify_sequenced(
    backend: Backend,
    era: int,
    trust: Trust | None,
    report: VerifyReport,
    *,
    store_id: str,
    life: Lifecycle | None = None,
    stalled_after_s: float = DEFAULT_STALLED_AFTER_S,
    now: datetime | None = None,
    checkpoint: Checkpoint | None = None,
) -> VerifyReport:
    """``report`` (the format-1 walk's, of seqs before ``era``) with the format-2 walk added.
    ``life``: the format-1 walk's :class:`Lifecycle` when it ends (its open intents), so a
    format-2 outcome of a format-1 REQUEST or replay intent is judged as format 1 would.
    ``checkpoint``: a checkpoint file of a seq at or after ``era`` (its signature checked
    by the caller), which the log must still hold and extend."""
    life = life if life is not None else Lifecycle()
    with backend.reader.connect() as conn:
        walk = _Walk(trust, _start(conn, era), era, _edge(backend, era), store_id, life)
        snap = conn.execute(text(_SNAPSHOT)).one()
    highest, chain_top = int(snap.highest), int(snap.chain_top)
    walk.checks = CheckpointChecks(trust, int(snap.latest), walk.defect, held=checkpoint)
    last = era - 1
    while True:
        with backend.reader.connect() as conn:
            page = conn.execute(text(_ROWS), {"era": era, "last": last, "n": PAGE}).all()
            page = [r for r in page if r.seq <= highest]
            if page:
                walk.checks.load(conn, last, int(page[-1].seq))
            refs = [ref for r in page for ref in _refs_of(r)]
            intact = _intact(conn, refs)
            walk.erased = erased_at(conn, [ref for ref in refs if ref not in intact])
            first_defect = len(walk.defects)
            for r in page:
                walk.row(r, intact)
            if page:
                _settle(conn, walk, int(page[-1].seq), first_defect)
        if len(page) < PAGE or page[-1].seq >= highest:
            if page:
                last = int(page[-1].seq)
            break
        last = int(page[-1].seq)
    linked = walk.linked_head - era + 1
    with backend.reader.connect() as conn:
        walk.checks.finish(conn, max(last, era - 1), walk.linked_head)
        # Bounded by the walk's linked head: the integrator may link more meanwhile.
        links = conn.execute(
            text("SELECT count(*) FROM chain WHERE seq <= :h"), {"h": walk.linked_head}
        ).scalar_one()
    if int(links) != linked:
        walk.defect(
            None,
            DefectKind.OUTSIDE_CHAIN,
            f"the chain holds {links} links up to seq {walk.linked_head}, but {linked} events "
            "are linked up to it",
        )
    if chain_top > walk.linked_head:
        # Its links were there before the walk began, so the walk would have met them:
        # a row the integrator did not make, which stops integration at that seq for good.
        walk.defect(
            chain_top,
            DefectKind.OUTSIDE_CHAIN,
            f"the chain holds a link at seq {chain_top}, above the linked prefix (which ends "
            f"at seq {walk.linked_head}): integration cannot pass it",
        )
    _stalled(walk, stalled_after_s, now or datetime.now(UTC))
    defects = (*report.defects, *walk.defects)[:MAX_DEFECTS]
    update: dict[str, Any] = {
        "ok": not defects,
        "defects": defects,
        "events_checked": report.events_checked + walk.count,
        "bytes_checked": report.bytes_checked + walk.bytes,
        "sequenced_from": era,
        "pending_integration": walk.pending,
        "pending_since": walk.pending_since,
        "integrator_keys": tuple(
            TrustedKeyInfo(key_id=k.key_id, public_key=k.public_key)
            for k in (trust.integrator or () if trust is not None else ())
        ),
        "integrator_checkpoints_checked": walk.checks.checked,
        "voids_checked": walk.voids,
    }
    if checkpoint is not None:
        update.update(
            checkpoint_seq=checkpoint.seq,
            tree_root_checked=report.tree_root_checked or walk.checks.held_root_checked,
        )
    if walk.linked_head >= era:
        update.update(head_seq=walk.linked_head, head_hash=walk.prev)
    return report.model_copy(update=update)


def _stalled(walk: _Walk, after_s: float, now: datetime) -> None:
    since = walk.pending_since
    if since is None or (now - since).total_seconds() <= after_s:
        return
    walk.defect(
        walk.linked_head + 1,
        DefectKind.STALLED,
        f"{walk.pending} event(s) pending integration since {since.isoformat()}, longer than "
        f"{after_s:g} s: the integrator is stopped or blocked (run `gateway audit integrate`)",
    )


def _refs_of(r: Any) -> list[str]:
    parsed = parse_body(as_bytes(r.body))
    return [] if isinstance(parsed, str) else _refs(parsed)
