"""Link hashing and verification of the event chain.

    body = event_body(seq=1, event_id="e1", ..., data={}, payloads={}, policy_ref=None)
    link_hash(GENESIS, body)                  # -> "sha256:..." of GENESIS || body
    verifier = Verifier(checkpoint)
    verifier.feed(row, parse_body(row.body), contents)   # for each row, in seq order
    report = verifier.report()

Every event stores its body exactly as hashed (RFC 8785 bytes) and ``hash = sha256(prev_hash
|| body)``; the first event links to :data:`GENESIS`. The searchable columns are copies of
fields inside the body, so verify compares them too: an edited column that the hash does not
cover would otherwise go unnoticed. Verify checks every link (immudb's published flaw was a
verifier that skipped the middle ones).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, NamedTuple

import orjson
from sqlalchemy import Result

from audit._bounded import MAX_BYTES, MAX_DEPTH, fast_loads
from audit._bounded import loads as bounded_loads
from audit._ordinary_body import Ordinary, StoredBody, mirrored_fields, read_ordinary
from audit._walk_digests import Relied, SignaturesDigest, TreeBuilder, b64
from audit.canonical import canonical_bytes, digest
from audit.lifecycle import FED_KINDS, INTENT_KINDS, NAMING_KINDS, Lifecycle, Target
from audit.models import Checkpoint, Defect, DefectKind, TrustedKeyInfo, VerifyReport
from audit.models import format_time as format_time  # one definition, beside StoredEvent
from audit.schema import EVENT_COLUMNS
from audit.signing import Trust

BODY_VERSION = 1
GENESIS = "sha256:" + "0" * 64
MAX_DEFECTS = 1000
# Columns that must equal the same-named field inside the hashed body: all but the chain's
# own (body, prev_hash, hash), the two verify checks in their own way (seq; recorded_at,
# held in the body as text) and the record signature, which signs the hash from outside it
# (audit.signing). Migration 0005's trigger checks the same list on PostgreSQL.
MIRRORED = tuple(
    c
    for c in EVENT_COLUMNS
    if c not in {"seq", "recorded_at", "body", "prev_hash", "hash", "signature", "key_id"}
)


LINK_BROKEN = "prev_hash is not the previous event's hash"
CHECKPOINT_REWRITTEN = "hash differs from the checkpoint: log rewritten"


def gap_detail(expected: int, seq: int) -> str:
    """A gap's defect detail: seq ``expected`` (and up to ``seq - 1``) missing."""
    missing = f"{expected}" if seq == expected + 1 else f"{expected}..{seq - 1}"
    return f"seq {missing} missing before seq {seq}"


_orjson_loads = orjson.loads
_mirrored = itemgetter(*(EVENT_COLUMNS.index(c) for c in MIRRORED))
_ordinary_mirrored = mirrored_fields(MIRRORED)


def as_bytes(value: object) -> bytes:
    """A BLOB column's value as bytes, whatever type a hand-edit left in it.

    SQLite keeps whatever type a statement wrote: ``replace(content, ...)`` turns a BLOB into
    TEXT (and ``bytes(str)`` raises). Encoding gives the bytes that were written, so a digest
    check then names the edit instead of crashing on it.
    """
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8")  # an INTEGER or REAL written over the BLOB


class EventRow(NamedTuple):
    """One ``events`` row as verify reads it. The fields are the table's columns in order
    (:data:`audit.schema.EVENT_COLUMNS`; a test pins the two together): a tuple, because
    verify's hot loop reads millions of them."""

    seq: int
    event_id: str
    request_id: str
    kind: str
    recorded_at: datetime
    task: str | None
    caller: str | None
    policy_fingerprint: str | None
    request_hash: str | None
    body: bytes
    prev_hash: str
    hash: str
    signature: str | None = None
    key_id: str | None = None

    @classmethod
    def from_result(cls, result: Result[Any]) -> list[EventRow]:
        """Every row of ``result``, a select of the ``events`` columns, with the types a
        hand-edit may have changed put back (see :func:`as_bytes`): verify must still read
        such a row and name it, not crash on it.

        The result's column names are checked once, then each row is zipped with them; a
        lookup by name per value would cost more than the rest of verify's work on a row.
        """
        names = tuple(result.keys())
        if names != cls._fields:
            raise ValueError(f"not a select of the events columns: {', '.join(names)}")
        return [
            cls._make([v if fix is None else fix(v) for fix, v in zip(_RETYPE, row, strict=True)])
            for row in result
        ]


# What EventRow.from_result applies to a column's value, by column name (SQLite keeps
# whatever type a statement wrote), laid out in the columns' order.
_RETYPES: dict[str, Callable[[Any], Any]] = {"body": as_bytes, "prev_hash": str, "hash": str}
_RETYPE = tuple(_RETYPES.get(name) for name in EventRow._fields)


class Census(NamedTuple):
    """What the events table holds, counted before the walk: ``rows`` in all, ``highest`` seq
    (0 if none), and the seqs below 1 (at most :data:`MAX_DEFECTS`), which no walk reaches."""

    rows: int
    highest: int
    below_one: tuple[int, ...]
    below_one_count: int


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time`; refuses any other spelling of the instant."""
    # fromisoformat is C and ~10x faster than strptime, which dominated verify's profile;
    # the length and "Z" checks keep it to the one fixed-width form format_time writes.
    if len(text) != 27 or text[-1] != "Z" or text[10] != "T":
        raise ValueError(f"recorded_at {text!r} is not YYYY-MM-DDTHH:MM:SS.ffffffZ")
    return datetime.fromisoformat(text[:-1]).replace(tzinfo=UTC)


def _members(value: dict[str, Any]) -> bytes:
    """The canonical members of a non-empty object, without its braces."""
    return canonical_bytes(value)[1:-1]


class BodyTemplate(NamedTuple):
    """An event body with its store- and chain-dependent fields left out: ``durability`` (the
    store's), ``recorded_at`` and ``seq`` (assigned under the chain lock).

    Everything else is canonicalised when the draft is prepared, outside the chain lock;
    :meth:`fill` adds the rest. The parts are laid out as RFC 8785 lays out the whole object:
    members sorted by key (all keys are ASCII: ``caller``, ``data``, ``durability``,
    ``event_id``, ``kind``, ``payloads``, ``policy_fingerprint``, ``policy_ref``,
    ``recorded_at``, ``request_hash``, ``request_id``, ``seq``, ``task``, ``v``), each
    ``"key":value`` canonical, joined by commas.
    """

    head: bytes  # {"caller":...,"data":...,"durability":
    before_time: bytes  # ,"event_id":...,"policy_ref":...,"recorded_at":
    before_seq: bytes  # ,"request_hash":...,"request_id":...,"seq":
    tail: bytes  # ,"task":...,"v":1}

    @classmethod
    def of(
        cls,
        *,
        event_id: str,
        request_id: str,
        kind: str,
        task: str | None,
        caller: str | None,
        policy_fingerprint: str | None,
        request_hash: str | None,
        data: Mapping[str, Any] | bytes,
        payloads: Mapping[str, str],
        policy_ref: str | None,
    ) -> BodyTemplate:
        """``data`` may be given as its canonical bytes already (the append path has them)."""
        data_bytes = data if isinstance(data, bytes) else canonical_bytes(dict(data))
        middle = {
            "event_id": event_id,
            "kind": kind,
            "payloads": dict(payloads),
            "policy_fingerprint": policy_fingerprint,
            "policy_ref": policy_ref,
        }
        return cls(
            b"".join((b'{"caller":', canonical_bytes(caller), b',"data":', data_bytes)),
            b"," + _members(middle) + b',"recorded_at":',
            b"," + _members({"request_hash": request_hash, "request_id": request_id}) + b',"seq":',
            b"," + _members({"task": task, "v": BODY_VERSION}) + b"}",
        )

    def fill(self, durability: bytes, recorded_at: bytes, seq: int) -> bytes:
        """The body. ``durability`` and ``recorded_at`` are canonical (:func:`canonical_time`)."""
        return b"".join(
            (
                self.head,
                b',"durability":',
                durability,
                self.before_time,
                recorded_at,
                self.before_seq,
                canonical_bytes(seq),
                self.tail,
            )
        )


def canonical_time(moment: datetime) -> bytes:
    return canonical_bytes(format_time(moment))


def event_body(
    *,
    seq: int,
    event_id: str,
    request_id: str,
    kind: str,
    recorded_at: datetime,
    task: str | None,
    caller: str | None,
    policy_fingerprint: str | None,
    request_hash: str | None,
    durability: str,
    data: Mapping[str, Any] | bytes,
    payloads: Mapping[str, str],
    policy_ref: str | None,
) -> bytes:
    """The RFC 8785 bytes of an event (see :class:`BodyTemplate`, which builds them)."""
    template = BodyTemplate.of(
        event_id=event_id,
        request_id=request_id,
        kind=kind,
        task=task,
        caller=caller,
        policy_fingerprint=policy_fingerprint,
        request_hash=request_hash,
        data=data,
        payloads=payloads,
        policy_ref=policy_ref,
    )
    return template.fill(canonical_bytes(durability), canonical_time(recorded_at), seq)


def link_hash(prev_hash: str, body: bytes) -> str:
    return digest(prev_hash.encode("ascii") + body)


def content_refs(parsed: Mapping[str, Any]) -> tuple[list[str], str | None]:
    payloads = parsed.get("payloads") or {}
    policy = parsed.get("policy_ref")
    return [str(d) for d in payloads.values()], str(policy) if policy is not None else None


class Verdict(NamedTuple):
    """Why a row's record signature does not check out."""

    kind: DefectKind
    detail: str


def signature_verdict(
    seq: int, kid: str | None, signature: str | None, event_hash: str, trust: Trust
) -> Verdict | bool | None:
    """None when an event's signature checks out under ``trust``; True for an unsigned
    event that ``trust`` allows (it predates signing); else the :class:`Verdict`."""
    if signature is None and seq < trust.allow_unsigned_before:
        return True
    reason = trust.keys.check(kid, signature, event_hash)
    if reason is None:
        return None
    if signature is None:
        return Verdict(DefectKind.UNSIGNED, reason)
    if trust.keys.knows(kid):
        return Verdict(DefectKind.BAD_SIGNATURE, reason)
    return Verdict(DefectKind.UNTRUSTED_SIGNER, reason)


# Whether a row's recorded_at column (as read) is the instant its body records: called with
# the seq, the column's value, the body's text and that text parsed. A reader that reads the
# column as stored text (audit._verify_read) compares the spelling first and parses only a
# row whose spelling differs.
SameTime = Callable[[int, object, str, datetime], bool]


def _same_instant(seq: int, column: object, text: str, when: datetime) -> bool:
    return column == when


class Verifier:
    """Checks rows fed in seq order; holds only the previous hash, so memory stays flat.

    ``contents`` maps each content digest referenced by the rows just fed to the digest its
    stored bytes actually hash to (or None if the row is missing); the caller looks them up
    in batches.
    """

    def __init__(
        self,
        checkpoint: Checkpoint | None = None,
        trust: Trust | None = None,
        *,
        same_time: SameTime | None = None,
        relied: Relied | None = None,
        measure_head: bool = False,
    ) -> None:
        self.checkpoint = checkpoint
        self.trust = trust
        # A verified checkpoint this verify relies on for the signatures of events 1..N
        # (audit._walk_digests): those are not checked again, their key ids and columns are.
        self.relied = relied
        self._relied_seq = relied.seq if relied is not None else 0
        # The tree and the signature columns are folded only when a checkpoint, a relied-on
        # attestation or the caller (to write a verified checkpoint) needs them.
        # Not for a relied-on checkpoint: its root is a function of the hashes 1..N, which
        # the walk's links and the hash at N already pin down.
        self.tree_upto: float = float("inf") if measure_head else _root_seq(checkpoint)
        self.tree = TreeBuilder() if self.tree_upto else None
        self.sigs_upto: float = float("inf") if measure_head else self._relied_seq
        self.sigs = SignaturesDigest() if self.sigs_upto else None
        self.tree_root_checked = False
        self.relied_seen = False
        self.same_time = same_time or _same_instant
        self.expected = 1
        self.prev_hash = GENESIS
        self.count = 0
        self.bytes = 0
        self.defects: list[Defect] = []
        self.checkpoint_seen = False
        self.unsigned_allowed = 0
        self.life = Lifecycle()
        self._page_from = 0

    # What an event names by seq, and the lives of requests with an unmatched outcome, are
    # looked up once per page (audit.lifecycle): the caller feeds a page, asks what is wanted,
    # looks it up and settles.
    wanted_kinds = INTENT_KINDS

    def wanted(self) -> tuple[set[int], set[str]]:
        return self.life.wanted()

    def settle(self, targets: Mapping[int, Target], lives: Iterable[Target]) -> None:
        for seq, kind, detail in self.life.settle(targets, lives):
            self._defect(seq, kind, detail)
        # The page's defects in seq order, as if each had been found at its event.
        page = self.defects[self._page_from :]
        page.sort(key=lambda d: d.seq if d.seq is not None else 0)
        self.defects[self._page_from :] = page
        self._page_from = len(self.defects)

    def _defect(self, seq: int | None, kind: DefectKind, detail: str) -> None:
        if len(self.defects) < MAX_DEFECTS:
            self.defects.append(Defect(seq=seq, kind=kind, detail=detail))

    def feed(
        self,
        row: EventRow,
        parsed: Parsed,
        contents: Mapping[str, str | None],
        signature: Verdict | bool | None = False,
    ) -> None:
        """Check one row; ``parsed`` is :func:`parse_page`'s of its body. ``signature`` is
        :func:`signature_verdict` of the row when the caller checked it already (in a pool
        of threads, audit._verify_pool); False (the default) checks it here."""
        if isinstance(parsed, Ordinary):  # each check and its wording is the dict's, here
            parsed = parse_body(row.body)
        seq = row.seq
        self.count += 1
        self.bytes += len(row.body)
        if seq != self.expected:
            # Named by the first missing seq: that is where the log stopped being whole.
            self._defect(self.expected, DefectKind.GAP, gap_detail(self.expected, seq))
        if row.prev_hash != self.prev_hash:
            self._defect(seq, DefectKind.BROKEN_LINK, LINK_BROKEN)
        if link_hash(row.prev_hash, row.body) != row.hash:
            self._defect(seq, DefectKind.HASH_MISMATCH, "stored hash != sha256(prev_hash || body)")
        if self.tree is not None and seq <= self.tree_upto:
            self.tree.add(row.hash)
        if self.sigs is not None and seq <= self.sigs_upto:
            self.sigs.add(seq, row.key_id, row.signature)
            if seq == self._relied_seq:
                self._check_relied(seq, row.hash)
        if self.trust is not None:
            if seq <= self._relied_seq:
                verdict = self._attested_verdict(seq, row.key_id, row.signature)
            elif signature is False:
                verdict = signature_verdict(seq, row.key_id, row.signature, row.hash, self.trust)
            else:
                verdict = signature
            if isinstance(verdict, Verdict):
                self._defect(seq, verdict.kind, verdict.detail)
            elif verdict is True:
                self.unsigned_allowed += 1  # a legacy row the caller said predates signing
        if isinstance(parsed, str):
            self._defect(seq, DefectKind.BAD_BODY, f"body does not parse: {parsed}")
        else:
            self._check_body(row, parsed, contents)
        cp = self.checkpoint
        if cp is not None and seq == cp.seq:
            self.checkpoint_seen = True
            if row.hash != cp.hash:
                self._defect(seq, DefectKind.CHECKPOINT, CHECKPOINT_REWRITTEN)
            elif cp.root is not None:  # a differing hash differs in its leaf: said once
                self._check_root(seq, cp.root)
        self.expected = seq + 1
        self.prev_hash = row.hash

    def feed_page(
        self,
        rows: Sequence[EventRow],
        parsed: Sequence[Parsed],
        contents: Mapping[str, str | None],
    ) -> None:
        """:meth:`feed` of each row, its signature checked here. A row with nothing to report
        (every check passes) takes a short path, the same checks in one loop; any other row
        goes through :meth:`feed`, before anything of it was counted, so its defects are
        said exactly as feed says them."""
        feed, trust, same_time = self.feed, self.trust, self.same_time
        relied_seq, relied_keys = self._relied_seq, self.relied.keys if self.relied else ()
        tree, tree_upto, sigs, sigs_upto = self.tree, self.tree_upto, self.sigs, self.sigs_upto
        cp_seq = self.checkpoint.seq if self.checkpoint is not None else 0
        life, life_fields = self.life.feed, self.life.feed_fields
        fields: StoredBody | None
        for row, body in zip(rows, parsed, strict=True):
            seq = row.seq
            if (
                seq != self.expected
                or row.prev_hash != self.prev_hash
                or seq in (cp_seq, relied_seq)
            ):
                feed(row, body, contents)  # a gap, a broken link, or a checkpoint's: feed's
                continue
            if type(body) is Ordinary:  # audit._ordinary_body: the fields typed in C
                fields = body.body
                if (
                    fields.seq != seq
                    or link_hash(row.prev_hash, row.body) != row.hash
                    or _mirrored(row) != _ordinary_mirrored(fields)
                    or not same_time(seq, row.recorded_at, fields.recorded_at, body.time)
                ):
                    feed(row, body, contents)
                    continue
                refs = body.refs
            elif (
                type(body) is not dict
                or body.get("seq") != seq
                or link_hash(row.prev_hash, row.body) != row.hash
                or _mirrored(row) != tuple(map(body.get, MIRRORED))
                or not same_time(seq, row.recorded_at, body["recorded_at"], body["_time"])
            ):
                feed(row, body, contents)
                continue
            else:
                fields = None
                refs = _refs(body)
            refs_ok = True
            for ref in refs:
                if contents.get(ref) != ref:
                    refs_ok = False
                    break
            verdict: Verdict | bool | None = None
            if refs_ok and trust is not None:
                if seq <= relied_seq:  # attested: signed by a key it trusted, else feed's
                    attested = row.signature is not None and row.key_id in relied_keys
                    verdict = None if attested else False
                else:
                    verdict = signature_verdict(seq, row.key_id, row.signature, row.hash, trust)
                    if verdict is True:  # unsigned, and allowed there
                        self.unsigned_allowed += 1
                        verdict = None
            if not refs_ok or verdict is not None:
                feed(row, body, contents, verdict if isinstance(verdict, Verdict) else False)
                continue
            self.count += 1
            self.bytes += len(row.body)
            if tree is not None and seq <= tree_upto:
                tree.add(row.hash)
            if sigs is not None and seq <= sigs_upto:
                sigs.add(seq, row.key_id, row.signature)
            if fields is not None:
                if fields.kind in FED_KINDS:  # never one whose data a life reads (_DATA_READ)
                    life_fields(seq, fields.kind, fields.request_id, fields.request_hash, None)
            elif isinstance(body, dict):
                life(seq, body)
            self.expected = seq + 1
            self.prev_hash = row.hash

    # -- a verified checkpoint relied on; the tree a checkpoint carries -----------------------

    def _attested_verdict(
        self, seq: int, kid: str | None, signature: str | None
    ) -> Verdict | bool | None:
        """The cheap check of an event whose signature an earlier verify checked: it is
        unsigned only where unsigned events are allowed, and its key id is one trusted now
        and by that verify (the signature columns' digest proves they are unchanged)."""
        assert self.trust is not None and self.relied is not None
        if signature is None:
            if seq < self.trust.allow_unsigned_before:
                return True
            return Verdict(DefectKind.UNSIGNED, "it is not signed")
        if kid in self.relied.keys:
            return None
        if self.trust.keys.knows(kid):
            detail = (
                f"it is signed by key {str(kid)[:40]!r}, which the verified checkpoint's "
                "verify did not trust: check this log without --since-verified"
            )
        else:
            detail = f"it is signed by key {str(kid)[:40]!r}, which is not a trusted key"
        return Verdict(DefectKind.UNTRUSTED_SIGNER, detail)

    def _check_relied(self, seq: int, event_hash: str) -> None:
        problem = self.relied_problem(event_hash)
        if problem is not None:
            self._defect(seq, DefectKind.CHECKPOINT, problem)

    def relied_problem(self, event_hash: str) -> str | None:
        """What is wrong at the relied-on checkpoint's seq, whose event has ``event_hash``,
        with the signature columns folded through it; None if nothing."""
        relied = self.relied
        assert relied is not None and self.sigs is not None
        self.relied_seen = True
        if event_hash != relied.hash:
            # A fork or rewrite: its other columns differ too, said once.
            return "hash differs from the verified checkpoint's: log rewritten or forked"
        if self.sigs.hexdigest() != relied.signatures_digest:
            return (
                f"the signature or key_id column of an event at or before seq {relied.seq} "
                "changed since the verified checkpoint: run verify without --since-verified "
                "to name it"
            )
        return None

    def _check_root(self, seq: int, root: str) -> None:
        problem = self.root_problem(seq, root)
        if problem is not None:
            self._defect(seq, DefectKind.CHECKPOINT, problem)

    def root_problem(self, seq: int, root: str) -> str | None:
        """Whether the tree of the events folded so far (1..``seq``) has the checkpoint's
        ``root``: None, or what is wrong."""
        assert self.tree is not None
        found = self.tree.root()
        self.tree_root_checked = True
        if found is None:
            return (
                f"the Merkle tree cannot be built: seq {self.tree.broken}'s hash is not a "
                "sha256 hash"
            )
        if b64(found) != root:
            return f"the Merkle root of events 1..{seq} is not the checkpoint's: log rewritten"
        return None

    def _check_body(
        self, row: EventRow, parsed: dict[str, Any], contents: Mapping[str, str | None]
    ) -> None:
        seq = row.seq
        self.life.feed(seq, parsed)
        if parsed.get("seq") != seq:
            self._defect(seq, DefectKind.SEQUENCE, f"row holds the body of seq {parsed.get('seq')}")
        wrong = (
            [c for c in MIRRORED if getattr(row, c) != parsed.get(c)]
            if _mirrored(row) != tuple(map(parsed.get, MIRRORED))  # the whole row at once first
            else []
        )
        if not self.same_time(seq, row.recorded_at, parsed["recorded_at"], parsed["_time"]):
            wrong.append("recorded_at")
        if wrong:
            self._defect(
                seq, DefectKind.COLUMN_MISMATCH, f"column(s) {', '.join(wrong)} differ from body"
            )
        for ref in _refs(parsed):
            actual = contents.get(ref)
            if actual is None:
                self._defect(seq, DefectKind.MISSING_CONTENT, f"content {ref} is missing")
            elif actual != ref:
                self._defect(seq, DefectKind.CONTENT_MISMATCH, f"content {ref} hashes to {actual}")

    def account(self, census: Census) -> None:
        """After the walk: every row counted before it must be one the walk checked."""
        for seq in census.below_one:
            self._defect(
                seq, DefectKind.OUTSIDE_CHAIN, f"a row at seq {seq}: the chain starts at seq 1"
            )
        walked = census.rows - census.below_one_count
        if walked != self.count or census.highest != self.expected - 1:
            self._defect(
                None,
                DefectKind.OUTSIDE_CHAIN,
                f"the table holds {walked} rows at seq 1..{census.highest} but verify walked "
                f"{self.count} ending at seq {self.expected - 1}",
            )

    def report(self) -> VerifyReport:
        cp = self.checkpoint
        relied = self.relied
        if relied is not None and not self.relied_seen:
            head = self.expected - 1
            if head < relied.seq:
                self._defect(
                    head + 1,
                    DefectKind.CHECKPOINT,
                    f"the log ends at seq {head} but the verified checkpoint names seq "
                    f"{relied.seq}: events were removed (truncation or rollback)",
                )
            else:
                detail = (
                    f"the event at seq {relied.seq} named by the verified checkpoint is missing"
                )
                self._defect(relied.seq, DefectKind.CHECKPOINT, detail)
        if cp is not None and not self.checkpoint_seen:
            head = self.expected - 1
            if head < cp.seq:
                detail = (
                    f"the log ends at seq {head} but the checkpoint names seq {cp.seq}: "
                    "events were removed (truncation or rollback)"
                )
                self._defect(head + 1, DefectKind.CHECKPOINT, detail)
            else:
                detail = f"the event at seq {cp.seq} named by the checkpoint is missing"
                self._defect(cp.seq, DefectKind.CHECKPOINT, detail)
        return VerifyReport(
            ok=not self.defects,
            events_checked=self.count,
            head_seq=self.expected - 1,
            head_hash=self.prev_hash,
            bytes_checked=self.bytes,
            defects=tuple(self.defects),
            checkpoint_seq=cp.seq if cp is not None else None,
            signatures_checked=self.trust is not None,
            trusted_keys=tuple(
                TrustedKeyInfo(key_id=k.key_id, public_key=k.public_key)
                for k in (self.trust.keys if self.trust is not None else ())
            ),
            unsigned_allowed_before=(
                self.trust.allow_unsigned_before
                if self.trust is not None and self.trust.allow_unsigned_before > 1
                else None
            ),
            unsigned_allowed=self.unsigned_allowed,
            signatures_checked_from=(
                self._relied_seq + 1 if self.trust is not None and self.relied else None
            ),
            tree_root_checked=self.tree_root_checked,
            head_root=(
                b64(root)
                if self.tree_upto == float("inf")
                and self.tree is not None
                and (root := self.tree.root()) is not None
                else None
            ),
            head_signatures_digest=(
                self.sigs.hexdigest()
                if self.sigs_upto == float("inf") and self.sigs is not None
                else None
            ),
        )


def _root_seq(checkpoint: Checkpoint | None) -> int:
    """The seq up to which the walk must build the tree: a checkpoint's that carries a root."""
    return checkpoint.seq if checkpoint is not None and checkpoint.root is not None else 0


# Kinds whose ``data`` verify reads (audit.lifecycle): their bodies are parsed by ``json``.
_DATA_READ = NAMING_KINDS
# A body as verify's walk holds it: read fast (the usual), parsed to a dict, or why it is not
# an event body.
Parsed = Ordinary | dict[str, Any] | str


def parse_page(bodies: Iterable[bytes]) -> list[Parsed]:
    """Each body read for verify's walk: as the store writes them in one typed decode
    (audit._ordinary_body), else :func:`parse_body`."""
    return [read_ordinary(body, BODY_VERSION, _DATA_READ) or parse_body(body) for body in bodies]


def parse_body(body: bytes) -> dict[str, Any] | str:
    """The parsed body (with its time under ``_time``), or why it is not an event body.

    Parsed by orjson when its result is the one ``json`` gives on every field verify reads,
    else by ``json`` (:func:`_faithful` says when; both within the same bounds), so the
    speed-up changes no verdict and no defect's wording.
    """
    fast = _parse_ordinary(body)
    return fast if fast is not None else _parse_any(body)


def _parse_ordinary(body: bytes) -> dict[str, Any] | None:
    """:func:`parse_body` of a body as the store writes them, in one function (verify's hot
    loop: this saves more than half its calls); None for anything else, which then takes
    the general path. Every test here is one :func:`_parse_any` makes, in the same order of
    precedence, so a body it accepts parses identically (tests/audit/test_fast_verify.py)."""
    if len(body) > MAX_BYTES or body.count(b"[") + body.count(b"{") > MAX_DEPTH:
        return None
    try:
        parsed = _orjson_loads(body)
    except ValueError:
        return None
    if type(parsed) is not dict:
        return None
    get = parsed.get
    text, kind, seq, version = get("recorded_at"), get("kind"), get("seq"), get("v")
    if (
        type(seq) is not int
        or type(text) is not str
        or type(kind) is not str
        or kind in _DATA_READ
        or type(version) is not int
        or version != BODY_VERSION
        or len(text) != 27
        or text[-1] != "Z"
        or text[10] != "T"
        or float in list(map(type, parsed.values()))  # no field of a body is a float
    ):
        return None
    payloads, policy = get("payloads"), get("policy_ref")
    if policy is not None and type(policy) is not str:
        return None
    refs: list[str] = []
    if payloads:
        if type(payloads) is not dict:
            return None
        refs = list(payloads.values())
        for value in refs:
            if type(value) is not str:
                return None
    try:
        # With its "Z", as one call (a tenth of the slice, parse and replace parse_time
        # makes): it reads the same instant whenever it reads one, and a text it refuses
        # (an offset before the "Z") goes to the general path, which decides.
        parsed["_time"] = datetime.fromisoformat(text)
    except ValueError:
        return None
    if policy:
        refs.append(policy)
    parsed["_refs"] = refs
    return parsed


def _parse_any(body: bytes) -> dict[str, Any] | str:
    try:
        fast = fast_loads(body)
    except ValueError:
        fast = None  # json decides: it accepts some text orjson refuses (NaN, 1e400, ...)
    parsed = fast if _faithful(fast) else None
    try:
        if parsed is None:
            parsed = bounded_loads(body)  # depth and size bounded: a stored body is untrusted
        if not isinstance(parsed, dict) or parsed.get("v") != BODY_VERSION:
            return "not a version 1 event body"
        parsed["_time"] = parse_time(parsed["recorded_at"])
        payloads, policy = content_refs(parsed)
        parsed["_refs"] = [*payloads, policy] if policy else payloads
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return parsed


def _faithful(parsed: object) -> bool:
    """Whether orjson's parse of a body can stand for ``json``'s.

    They accept the same texts except that orjson refuses some json accepts (then ``json``
    parses), and turns an integer beyond 64 bits into a float where json keeps the int. So
    the fields verify reads must have types where that cannot have happened: ``seq`` an
    int, ``recorded_at`` text, no other field a float (none is, in a body), payload digests
    and ``policy_ref`` text, and no ``data`` that verify reads (the kinds of
    :data:`_DATA_READ` take the ``json`` path). So every field but ``data`` is what json
    gives, and ``data`` is read only where it is json's.
    """
    if type(parsed) is not dict:
        return False
    if type(parsed.get("seq")) is not int or type(parsed.get("recorded_at")) is not str:
        return False
    if float in list(map(type, parsed.values())):  # no field of a body is a float
        return False
    policy = parsed.get("policy_ref")
    if policy is not None and type(policy) is not str:
        return False
    payloads = parsed.get("payloads")
    if payloads:
        if type(payloads) is not dict:
            return False
        for value in payloads.values():
            if type(value) is not str:
                return False
    kind = parsed.get("kind")
    return type(kind) is str and kind not in _DATA_READ


def _refs(parsed: Mapping[str, Any] | Ordinary) -> list[str]:
    """The content digests a parsed body references, payloads first (:func:`parse_body`
    keeps them under ``_refs``)."""
    if isinstance(parsed, Ordinary):
        return parsed.refs
    refs: list[str] | None = parsed.get("_refs")
    if refs is None:
        payloads, policy = content_refs(parsed)
        refs = [*payloads, policy] if policy else payloads
    return refs


def referenced(bodies: Iterable[Parsed]) -> set[str]:
    """Content digests the parsed bodies reference (unparseable bodies reference nothing)."""
    refs: set[str] = set()
    for parsed in bodies:
        if isinstance(parsed, str):
            continue
        refs.update(_refs(parsed))
    return refs


def newest_refs(bodies: Sequence[Parsed], events: int = 4) -> list[str]:
    """The content digests the last ``events`` parsed bodies reference (a page's newest
    payloads: audit._verify_read.ChainReader.content_digests reads the rest near them)."""
    return [
        ref for parsed in bodies[-events:] if not isinstance(parsed, str) for ref in _refs(parsed)
    ]
