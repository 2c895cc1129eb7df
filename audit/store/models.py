"""The typed values that cross the audit store's boundary.

    draft = EventDraft(kind=EventKind.REQUEST, request_id="r1", task="t", caller="svc",
                       policy_fingerprint=None, request_hash=None, data={"prompt_chars": 12})
    appended = store.append(draft)          # -> Appended(seq=1, hash="sha256:...", ...)

Drafts are validated before they reach the chain lock, so a bad draft never holds up others.
A :class:`StoredEvent` renders itself for readers: ``export_row()`` is one export record (CSV
row or JSONL line), ``json_row()`` the event for a JSON view.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from audit.store.schema import EVENT_COLUMNS

# The event's record (a documented format): the table's columns in order, with the long
# body last; what `audit show --format json` is built from.
SIGNATURE_COLUMNS = ("signature", "key_id")
EXPORT_COLUMNS: tuple[str, ...] = (
    *(c for c in EVENT_COLUMNS if c != "body" and c not in SIGNATURE_COLUMNS),
    "body",
)
# An export's record: the same, with the record signature and its key id before the body, so
# a recipient can check authorship as well as the chain without the database.
SIGNED_EXPORT_COLUMNS: tuple[str, ...] = (*EXPORT_COLUMNS[:-1], *SIGNATURE_COLUMNS, "body")


def format_time(moment: datetime) -> str:
    """Fixed-width UTC with microseconds, so the same instant always has the same bytes."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventKind(StrEnum):
    REQUEST = "request"
    ATTEMPT_FAILED = "attempt_failed"
    RESPONSE = "response"
    FAILED = "failed"
    # The caller left before the outcome was recorded: a stream closed early, a call cancelled
    # or timed out by its caller, an interrupt (the partial answer, if any, is in the event).
    CANCELLED = "cancelled"
    REJECTED = "rejected"
    CACHE_HIT = "cache_hit"
    REPLAY = "replay"
    EXPORT = "export"
    CHECKPOINT = "checkpoint"
    # The gateway refused to use a recorded event that did not check out (what, which seq).
    INTEGRITY_ALERT = "integrity_alert"
    # An answer differs from what its policy pinned (the model that answered, where inference
    # ran, a server-side context edit): which check, what was expected, what the answer
    # reported, and the RESPONSE's seq. The answer was recorded and returned all the same.
    ANSWER_ALERT = "answer_alert"
    # A token count (Gateway.count_tokens): not a model call, but the planned request's content
    # went to the provider to be counted, so it is recorded, before it is sent.
    TOKEN_COUNT = "token_count"  # noqa: S105 - an event kind's name, not a secret
    # A reviewer read a request's recorded content (prompt, messages, answer): who, what, and
    # whether it was shown or refused because its record did not check out.
    ACCESS = "access"
    # An approver signed a task's policy fingerprint (Ed25519; the signature is in the data).
    APPROVAL = "approval"
    # A caller key issued (its id, caller and sha256 hash; never the key) or revoked.
    CALLER_KEY = "caller_key"
    CALLER_KEY_REVOKED = "caller_key_revoked"
    # Format 2 only (audit.store.sequenced): a seq whose writer never committed its event, voided
    # by that writer after a rollback or by the integrator after the grace; no request's.
    VOID = "void"
    # A record key retired: signed by the new key, naming the old one, which signs nothing
    # from this event's seq on (audit.verify.eras).
    KEY_ROTATION = "key_rotation"
    # A checkpoint key retired: names the old key and the new one (with the new key's
    # signature over both, its proof of possession); signed by a record key like any event.
    CHECKPOINT_KEY_ROTATION = "checkpoint_key_rotation"
    # A gateway started with tasks whose policy version lacks the approvals it requires: it
    # refuses those tasks (and serves the others); which, their fingerprints and approvals.
    # One event per start, not per refused request (each of those is a REJECTED).
    UNAPPROVED_TASKS = "unapproved_tasks"
    # An evidence pack built for a regime (`gateway evidence`): the regime, the period, who
    # built it, each item's verdict and the digest of every file in the pack.
    EVIDENCE_PACK = "evidence_pack"
    # A request's content made unrecoverable (audit.erasure): which payload digests, under
    # which rule, by whom and who approved it. Its request_id is the erased request's.
    ERASURE = "erasure"
    # A legal hold (its scope and reason) and its release: held content is never erased.
    LEGAL_HOLD = "legal_hold"
    HOLD_RELEASE = "hold_release"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EventDraft(_Frozen):
    kind: EventKind
    request_id: str = Field(min_length=1, max_length=128)
    task: str | None = Field(default=None, max_length=200)
    caller: str | None = Field(default=None, max_length=200)
    policy_fingerprint: str | None = None
    request_hash: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    # Large bytes (wire bodies) are stored content-addressed; only their digests are hashed
    # into the event body, so the chain stays small and a body is stored once however often
    # it recurs.
    payloads: Mapping[str, bytes] = Field(default_factory=dict)
    # Store each payload sealed under this random salt (audit.sealing; the gateway draws
    # one per request): its digest then confirms nothing once the row is erased, and no row
    # is shared with another request's events. None: stored plain, keyed by its sha256.
    seal_salt: bytes | None = Field(default=None, min_length=16, max_length=16)
    policy_content: dict[str, Any] | None = None
    # Or the content as its RFC 8785 bytes (never both): a caller that holds them spares the
    # store canonicalising the same policy on every append (audit.store._policy_bytes checks them).
    policy_canonical: bytes | None = None


class Appended(_Frozen):
    seq: int
    hash: str
    event_id: str
    recorded_at: datetime


class StoredEvent(_Frozen):
    """One event as read back: the ``events`` columns (:data:`audit.store.schema.EVENT_COLUMNS`),
    then the body's ``data`` and payload digests parsed out of it."""

    seq: int
    event_id: str
    request_id: str
    kind: EventKind
    recorded_at: datetime
    task: str | None
    caller: str | None
    policy_fingerprint: str | None
    request_hash: str | None
    body: bytes  # the RFC 8785 bytes exactly as hashed
    prev_hash: str
    hash: str
    # The writing gateway's signature of ``hash`` and its key's fingerprint (audit.store.signing);
    # None on an event written before signatures existed, or by a store without a signer.
    signature: str | None = None
    key_id: str | None = None
    data: dict[str, Any]
    payload_digests: dict[str, str]

    def export_row(self, *, signed: bool = False) -> dict[str, Any]:
        """The event as one record, keyed by :data:`EXPORT_COLUMNS` in that order (signed:
        :data:`SIGNED_EXPORT_COLUMNS`, what an export writes).

        Values are JSON-ready: the columns as stored, ``kind`` as its value, ``recorded_at``
        in the fixed-width form the body hashes and ``body`` as the UTF-8 text of the hashed
        bytes, so ``sha256(prev_hash || body) == hash`` (and, signed, the record signature of
        that hash) can be checked from the record alone.
        """
        columns = SIGNED_EXPORT_COLUMNS if signed else EXPORT_COLUMNS
        row = {name: getattr(self, name) for name in columns}
        row["kind"] = self.kind.value
        row["recorded_at"] = format_time(self.recorded_at)
        row["body"] = self.body.decode("utf-8")
        return row

    def json_row(self) -> dict[str, Any]:
        """The event for a JSON view: :meth:`export_row` without the body, then its ``data``
        and ``payloads`` (name to digest) parsed out of the body."""
        row = self.export_row()
        del row["body"]
        row["data"] = self.data
        row["payloads"] = self.payload_digests
        return row


class DefectKind(StrEnum):
    GAP = "gap"  # a sequence number is missing (a deleted event)
    SEQUENCE = "sequence"  # seq out of order, duplicated, or not what the body says
    BROKEN_LINK = "broken_link"  # prev_hash is not the previous event's hash
    HASH_MISMATCH = "hash_mismatch"  # stored hash is not sha256(prev_hash || body)
    BAD_BODY = "bad_body"  # the body is not canonical JSON of the expected shape
    COLUMN_MISMATCH = "column_mismatch"  # a searchable column disagrees with the hashed body
    MISSING_CONTENT = "missing_content"  # a referenced payload or policy row is absent
    CONTENT_MISMATCH = "content_mismatch"  # a payload or policy row does not hash to its key
    CHECKPOINT = "checkpoint"  # the log does not contain or extend the checkpointed head
    OUTSIDE_CHAIN = "outside_chain"  # a row verify's walk cannot reach (seq < 1), or a count off
    # Authorship (audit.store.signing): checked against the keys verify was told to trust.
    UNSIGNED = "unsigned"  # no record signature where one is required
    UNTRUSTED_SIGNER = "untrusted_signer"  # signed, but by a key verify does not trust
    BAD_SIGNATURE = "bad_signature"  # the signature is not the named key's signature of hash
    # A request's life: an outcome follows its REQUEST, and ends it once.
    ORPHAN_OUTCOME = "orphan_outcome"  # an outcome with no open REQUEST (same id and hash)
    DUPLICATE_OUTCOME = "duplicate_outcome"  # a second terminal outcome of one request
    BAD_REFERENCE = "bad_reference"  # a CACHE_HIT, REPLAY or alert names an event wrongly
    # Format 2: events pending integration for longer than verify's threshold (the
    # integrator is stopped or blocked, and nothing after them is linked or checkpointed).
    STALLED = "stalled"
    # Signed by a record key at or after the seq from which a key rotation retired it.
    RETIRED_KEY = "retired_key"


class Defect(_Frozen):
    seq: int | None
    kind: DefectKind
    detail: str


class TrustedKeyInfo(_Frozen):
    key_id: str
    public_key: str  # hex of the raw Ed25519 public key


class SignedBy(_Frozen):
    """An earlier verified checkpoint that a later one rests on, named by what it signed."""

    seq: int
    hash: str
    public_key: str | None
    created_at: str  # as the checkpoint's signed fields spell it (format_time)


class Verified(_Frozen):
    """What a *verified* checkpoint attests (``gateway audit verify --write-verified``): a
    verify of this log from seq 1 to the checkpoint's seq passed, every link, body, column,
    content and lifecycle check and every record signature, the latter against
    ``trusted_keys`` (events below ``allow_unsigned_before`` could be unsigned). The
    signatures of events at or before ``rests_on.seq`` were not checked again by that verify
    but by the one ``rests_on`` names, transitively.

    ``signatures_digest`` covers the ``signature`` and ``key_id`` columns of events 1..seq
    (:func:`audit.store.chain.signatures_digest`): they are outside the hash chain, so a later
    verify that relies on this one proves with it that they are still what was checked.
    """

    trusted_keys: tuple[TrustedKeyInfo, ...]
    allow_unsigned_before: int | None = None
    signatures_digest: str
    rests_on: SignedBy | None = None


class Checkpoint(_Frozen):
    """A signed chain head. ``signature`` is Ed25519 over :meth:`signed_fields`' canonical
    bytes.

    Version 2 adds the RFC 6962 Merkle tree of events 1..seq (``tree_size`` = seq,
    ``root`` base64; ``note`` the same head as a C2SP signed note, by the same key) and, for a
    verified checkpoint, ``verified``; all inside the signed fields. A version 1 file still
    verifies: its signed fields are what they were.
    """

    version: int = 1
    store_id: str
    seq: int
    # None: a tree checkpoint (`audit tree-head`, a receipt's) read as one; its note signs
    # only the tree size and root, which fix every hash under them, this one included.
    hash: str | None
    created_at: datetime | None
    public_key: str | None  # hex of the raw Ed25519 public key; None for an unsigned head
    signature: str | None  # hex
    tree_size: int | None = None
    root: str | None = None  # base64 of the 32-byte RFC 6962 root, as in the note
    note: str | None = None
    verified: Verified | None = None

    def signed_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "version": self.version,
            "store_id": self.store_id,
            "seq": self.seq,
            "hash": self.hash,
            "created_at": format_time(self.created_at) if self.created_at else None,
            "public_key": self.public_key,
        }
        if self.version >= 2:
            fields["tree_size"] = self.tree_size
            fields["root"] = self.root
            fields["note"] = self.note
            fields["verified"] = (
                self.verified.model_dump(mode="json") if self.verified is not None else None
            )
        return fields


class ErasureNote(_Frozen):
    """Content verify found erased by policy: the request, the erasure event's seq, and how
    many of the payloads that event names are gone."""

    request_id: str
    seq: int
    erased: int


class VerifyReport(_Frozen):
    ok: bool
    events_checked: int
    head_seq: int
    head_hash: str
    bytes_checked: int
    defects: tuple[Defect, ...]
    checkpoint_seq: int | None = None
    # Which keys the record signatures were checked against; ``signatures_checked`` is False
    # only for a library call that gave no keys to a store without a signer.
    signatures_checked: bool = False
    trusted_keys: tuple[TrustedKeyInfo, ...] = ()
    unsigned_allowed_before: int | None = None  # events below this seq may be unsigned
    unsigned_allowed: int = 0  # how many such legacy events were found
    # The checkpoint's signer (hex public key, None if unsigned) and whether it was a trusted
    # key; False only when the caller passed the unsafe flag to accept it anyway.
    checkpoint_signer: str | None = None
    checkpoint_pinned: bool | None = None
    # With a verified checkpoint (``verify --since-verified``): the signatures of events
    # 1..``signatures_attested.seq`` were not checked again (their key ids were: each must be
    # a key trusted now and by the attesting verify); this verify checked those from
    # ``signatures_checked_from`` on. None when every signature was checked here.
    signatures_checked_from: int | None = None
    signatures_attested: SignedBy | None = None
    # Whether the Merkle root of a version 2 checkpoint was recomputed from the walk.
    tree_root_checked: bool = False
    # What a verified checkpoint of this walk's head would carry (asked for only then).
    head_root: str | None = None
    head_signatures_digest: str | None = None
    # A format-2 log (audit.store.sequenced): the first format-2 seq, and its events that the
    # integrator has not linked yet (checked all the same) with the oldest one's time.
    sequenced_from: int | None = None
    pending_integration: int = 0
    pending_since: datetime | None = None
    # Format 2: the integrator keys its checkpoints and voids were checked against (apart
    # from the record keys), and how many of each the walk checked.
    integrator_keys: tuple[TrustedKeyInfo, ...] = ()
    integrator_checkpoints_checked: int = 0
    voids_checked: int = 0
    # Content removed under erasure events (audit.store.erasure), each checked against the
    # event that names it: how many payload rows, how many events, the first of them.
    content_erased: int = 0
    erasure_events: int = 0
    erasures: tuple[ErasureNote, ...] = ()

    @property
    def first_bad_seq(self) -> int | None:
        seqs = [d.seq for d in self.defects if d.seq is not None]
        return min(seqs) if seqs else None


class Relied(NamedTuple):
    """A verified checkpoint that this verify relies on for the signatures of events 1..seq:
    ``hash`` the event hash at seq, ``keys`` the key ids whose signatures it may stand for
    (trusted both by the attesting verify and by this one, with the same public key),
    ``signatures_digest`` what it attests of the signature columns."""

    seq: int
    hash: str
    keys: frozenset[str]
    signatures_digest: str
