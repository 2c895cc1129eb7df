"""Verify's walk: checks the rows of the chain fed in seq order, in flat memory.

    verifier = Verifier(checkpoint, trust)
    verifier.feed_page(rows, parse_page(bodies), contents)   # or feed(row, parsed, contents)
    report = verifier.report()

Verify checks every link (immudb's published flaw was a verifier that skipped the middle
ones), every body against its columns and content, each request's life (audit.verify.lifecycle)
and, against ``trust``, every record signature. The range walk's workers run this same code
on pages of the log (audit.verify._range).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from hashlib import sha256
from operator import attrgetter
from typing import Any

from audit.canonical import DIGEST_PREFIX
from audit.store.chain import GENESIS, MAX_DEFECTS, MIRRORED, Census, EventRow, _mirrored, link_hash
from audit.store.erasure import erased_seq
from audit.store.models import Checkpoint, Defect, DefectKind, Relied, TrustedKeyInfo, VerifyReport
from audit.store.signing import Trust
from audit.verify._ordinary_body import Ordinary, StoredBody
from audit.verify._verdicts import Verdict, public_keys, signature_verdict, signed
from audit.verify._walk_digests import SignaturesDigest, TreeBuilder, b64
from audit.verify.body import Parsed, _refs, parse_body
from audit.verify.lifecycle import FED_KINDS, INTENT_KINDS, Lifecycle, Target

LINK_BROKEN = "prev_hash is not the previous event's hash"
CHECKPOINT_REWRITTEN = "hash differs from the checkpoint: log rewritten"


def gap_detail(expected: int, seq: int) -> str:
    """A gap's defect detail: seq ``expected`` (and up to ``seq - 1``) missing."""
    missing = f"{expected}" if seq == expected + 1 else f"{expected}..{seq - 1}"
    return f"seq {missing} missing before seq {seq}"


_ordinary_mirrored = attrgetter(*MIRRORED)  # the body's values of the mirrored columns
_BLANK = sha256()  # copied for each link hash: cheaper than a new hash object each time


# Whether a row's recorded_at column (as read) is the instant its body records: called with
# the seq, the column's value, the body's text and that text parsed. A reader that reads the
# column as stored text (audit.verify._read) compares the spelling first and parses only a
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
        # (audit.verify._walk_digests): those are not checked again, their key ids and columns are.
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
        # The trusted keys by key id, for feed_page's check of a signature that checks out
        # (any other is judged by signature_verdict, which names what is wrong).
        self._verify_keys = public_keys(trust)

    # What an event names by seq, and the lives of requests with an unmatched outcome, are
    # looked up once per page (audit.verify.lifecycle): the caller feeds a page, asks what is
    # wanted, looks it up and settles.
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
        of threads, audit.verify._signature_pool); False (the default) checks it here."""
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
            if cp.hash is not None and row.hash != cp.hash:
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
        verdicts: Sequence[Verdict | bool | None] | None = None,
    ) -> None:
        """:meth:`feed` of each row, its signature checked here, or by the caller:
        ``verdicts`` holds one :func:`signature_verdict` per row (False for a row to check
        here: one a relied-on checkpoint stands for). A row with nothing to report (every
        check passes) takes a short path, the same checks in one loop; any other row goes
        through :meth:`feed`, before anything of it was counted, so its defects are said
        exactly as feed says them."""
        feed, trust, same_time = self.feed, self.trust, self.same_time
        relied_seq, relied_keys = self._relied_seq, self.relied.keys if self.relied else ()
        tree, tree_upto, sigs, sigs_upto = self.tree, self.tree_upto, self.sigs, self.sigs_upto
        cp_seq = self.checkpoint.seq if self.checkpoint is not None else 0
        life, life_fields = self.life.feed, self.life.feed_fields
        verify_keys, blank = self._verify_keys, _BLANK
        fields: StoredBody | None
        checked: Sequence[Verdict | bool | None] = (
            verdicts if verdicts is not None else [False] * len(rows)
        )
        # The walk's position is held here while rows take the short path, and handed to feed
        # (which moves it itself) for any other.
        expected, prev_hash, counted, size = self.expected, self.prev_hash, self.count, self.bytes
        for row, body, given in zip(rows, parsed, checked, strict=True):
            seq = row.seq
            verdict: Verdict | bool | None = None
            if seq != expected or row.prev_hash != prev_hash or seq in (cp_seq, relied_seq):
                verdict = False  # a gap, a broken link, a checkpoint's: feed's
            else:
                # link_hash(prev_hash, body), without its two calls and the joined bytes
                link = blank.copy()
                link.update(prev_hash.encode("utf-8", "surrogatepass"))
                link.update(row.body)
                if type(body) is Ordinary:  # audit.verify._ordinary_body: the fields typed in C
                    fields = body.body
                    if (
                        fields.seq != seq
                        or DIGEST_PREFIX + link.hexdigest() != row.hash
                        or _mirrored(row) != _ordinary_mirrored(fields)
                        or not same_time(seq, row.recorded_at, fields.recorded_at, body.time)
                    ):
                        verdict = False
                    refs = body.refs
                elif (
                    type(body) is not dict
                    or body.get("seq") != seq
                    or DIGEST_PREFIX + link.hexdigest() != row.hash
                    or _mirrored(row) != tuple(map(body.get, MIRRORED))
                    or not same_time(seq, row.recorded_at, body["recorded_at"], body["_time"])
                ):
                    verdict = False
                else:
                    fields = None
                    refs = _refs(body)
                if verdict is None:
                    for ref in refs:
                        if contents.get(ref) != ref:
                            verdict = False
                            break
                if verdict is None and trust is not None:
                    if seq <= relied_seq:  # attested: signed by a key it trusted, else feed's
                        attested = row.signature is not None and row.key_id in relied_keys
                        verdict = None if attested else False
                    elif given is not False:
                        verdict = given
                    else:
                        verdict = signed(verify_keys, row)
                        if verdict is not None:  # it does not check out: the one rule says why
                            verdict = signature_verdict(
                                seq, row.key_id, row.signature, row.hash, trust
                            )
                        if verdict is True:  # unsigned, and allowed there
                            self.unsigned_allowed += 1
                            verdict = None
            if verdict is not None:
                self.expected, self.prev_hash, self.count, self.bytes = (
                    expected, prev_hash, counted, size,
                )  # fmt: skip
                feed(row, body, contents, verdict if isinstance(verdict, Verdict) else given)
                expected, prev_hash, counted, size = (
                    self.expected, self.prev_hash, self.count, self.bytes,
                )  # fmt: skip
                continue
            counted += 1
            size += len(row.body)
            if tree is not None and seq <= tree_upto:
                tree.add(row.hash)
            if sigs is not None and seq <= sigs_upto:
                sigs.add(seq, row.key_id, row.signature)
            if fields is not None:
                if fields.kind in FED_KINDS:  # never one whose data a life reads (_DATA_READ)
                    life_fields(seq, fields.kind, fields.request_id, fields.request_hash, None)
            elif isinstance(body, dict):
                life(seq, body)
            expected = seq + 1
            prev_hash = row.hash
        self.expected, self.prev_hash, self.count, self.bytes = expected, prev_hash, counted, size

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
            elif actual != ref and (erasure := erased_seq(actual)) is not None:
                # Gone under an erasure event (checked against its body after the walk): by
                # policy only if that event came after this one, else deleted beforehand.
                if erasure <= seq:
                    detail = f"content {ref} is missing (erasure seq {erasure} precedes it)"
                    self._defect(seq, DefectKind.MISSING_CONTENT, detail)
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
