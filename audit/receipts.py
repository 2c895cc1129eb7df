"""Receipts: a request's events proven into a signed Merkle tree head, checked offline.

    receipt = make_receipt(store, "req-1", key)              # key: the checkpoint key's seed
    text = dumps(receipt)                                    # what `audit prove -o` writes
    report = check_receipt(text, [public_key_hex])           # no database: the file alone
    report = check_consistency(store, old_text, new_text, [public_key_hex])

**The tree** is audit.merkle's over the log: leaf ``seq - 1`` is the raw bytes of event
``seq``'s hash. Its complete subtrees are stored (audit._merkle_store, table
``merkle_nodes``), derived from the log and extended from the highest stored leaf before each
proof, so a proof or a tree head costs O(log n) reads once the table has caught up (the
events appended since the last proof are hashed once). The stored rows are not trusted:
every inclusion proof a receipt carries is checked against the root before it is signed.
Where the table cannot be written (a read-only database or role) the hash column is streamed
instead, in flat memory (O(n) reads). ``verify --from/--to`` always streams the log: it is
the check that the log still holds the trees the checkpoints signed.

**The checkpoint** is a C2SP signed note in the tlog-checkpoint format
(https://c2sp.org/tlog-checkpoint, https://c2sp.org/signed-note): the origin line
(:func:`origin` of the store's id), the tree size, the base64 root, a blank line, and an
Ed25519 signature line ``— <origin> base64(key ID || signature)`` by the checkpoint key
(``GATEWAY_CHECKPOINT_KEY``), key ID = SHA-256(origin || 0x0A || 0x01 || public key)[:4].
Any C2SP verifier given the public key checks it; the JSON around it repeats the note's
fields for a reader, and a file whose fields differ from its note is refused.

**A receipt** holds the checkpoint and, for each of the request's events, its ``seq``,
``prev_hash``, ``hash``, body (the hashed bytes as text) and inclusion proof. The check
recomputes each hash from ``prev_hash`` and the body, the leaf from the hash, the root from
the proof, and compares it with the signed root: an altered body, proof node, root, size or
signature is refused with the reason. A receipt proves that these events are in the log the
key holder signed; it does not prove that the request has no other event.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from cryptography.x509 import Certificate
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from audit._bounded import UnreadableJSON
from audit._bounded import loads as bounded_loads
from audit._merkle_store import MerkleState
from audit.chain import link_hash
from audit.cosignature import Witness, WitnessCheck, check_cosignatures
from audit.errors import CheckpointError, NotFound
from audit.merkle import (
    EMPTY_ROOT,
    ProofError,
    Range,
    Scan,
    TreeHead,
    consistency_path,
    event_leaf,
    inclusion_path,
    scan,
    verify_consistency,
    verify_inclusion,
)
from audit.schema import Event
from audit.signing import TrustedKeys, UnusableKey
from audit.store import AuditStore
from audit.timestamp import TimeStamp, TimeStampCheck, check_time_stamps

CHECKPOINT_FORMAT: Final = "compliance-gateway tree checkpoint v1"
RECEIPT_FORMAT: Final = "compliance-gateway receipt v1"
ORIGIN_PREFIX = "compliance-gateway.audit/"
ED25519 = b"\x01"  # the signed-note signature type of Ed25519
EM_DASH = "\u2014"
MAX_NOTE = 64 * 1024
MAX_SIGNATURES = 100
MAX_FILE = 64 * 1024 * 1024  # a receipt of a request with very many events
LEAF_PAGE = 20_000  # hash-column rows read at a time while a proof streams the leaves


class ReceiptError(CheckpointError):
    """A receipt or tree checkpoint that cannot be read or made (not one that fails its
    check: that is a report with reasons)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- signed notes (C2SP signed-note, Ed25519) --------------------------------------------------


def origin(store_id: str) -> str:
    return ORIGIN_PREFIX + store_id


def _public_raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def note_key_id(name: str, public_raw: bytes) -> bytes:
    """The 4-byte key ID of an Ed25519 note key: SHA-256(name || 0x0A || 0x01 || key)[:4]."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + ED25519 + public_raw).digest()[:4]


def verifier_key(name: str, public_raw: bytes) -> str:
    """The key as Go's sumdb/note and C2SP tools name it: ``name+keyid+base64(0x01||key)``."""
    b64 = base64.b64encode(ED25519 + public_raw).decode("ascii")
    return f"{name}+{note_key_id(name, public_raw).hex()}+{b64}"


def sign_note(text: str, name: str, seed: bytes) -> str:
    """The signed note of ``text`` (ending in a newline) by the Ed25519 key of ``seed``."""
    if not text.endswith("\n") or "\n\n" in text or any(c < " " and c != "\n" for c in text):
        raise ValueError("a note's text ends in one newline and has no blank line or control")
    if not name or "+" in name or any(c.isspace() for c in name):
        raise ValueError(f"{name!r} cannot name a note key")
    private = Ed25519PrivateKey.from_private_bytes(seed)
    signature = private.sign(text.encode("utf-8"))
    key_id = note_key_id(name, _public_raw(private.public_key()))
    line = f"{EM_DASH} {name} {base64.b64encode(key_id + signature).decode('ascii')}\n"
    return f"{text}\n{line}"


def open_note(note: str, name: str, trusted: Iterable[bytes]) -> tuple[str, bytes]:
    """The text of ``note`` and the raw public key that signed it, once a signature by one
    of ``trusted`` (raw Ed25519 public keys) under key name ``name`` checks out; else
    :class:`ProofError` saying why. Signatures by other keys are ignored, as C2SP says."""
    if len(note) > MAX_NOTE:
        raise ProofError(f"the checkpoint note is over {MAX_NOTE} characters")
    if any(c < " " and c != "\n" for c in note):
        raise ProofError("the checkpoint note holds a control character")
    cut = note.rfind("\n\n")
    if cut < 0 or not note.endswith("\n"):
        raise ProofError("the checkpoint is not a signed note (no blank line before signatures)")
    text, lines = note[: cut + 1], note[cut + 2 : -1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise ProofError(f"the checkpoint note has over {MAX_SIGNATURES} signatures")
    keys = {note_key_id(name, raw): raw for raw in trusted}
    for line in lines:
        dash, _, rest = line.partition(" ")
        signer, _, b64 = rest.partition(" ")
        try:
            blob = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            blob = b""
        if dash != EM_DASH or not signer or len(blob) < 5 or " " in b64:
            raise ProofError(f"the checkpoint note's signature line {line[:60]!r} is malformed")
        raw = keys.get(blob[:4]) if signer == name else None
        if raw is None:
            continue  # another key's: C2SP verifiers ignore signatures from unknown keys
        try:
            Ed25519PublicKey.from_public_bytes(raw).verify(blob[4:], text.encode("utf-8"))
        except InvalidSignature:
            raise ProofError(
                "the checkpoint's signature does not match its text: the tree size, the root "
                "or the signature was altered"
            ) from None
        return text, raw
    raise ProofError(
        "the checkpoint is signed by no trusted key (pass the public key of the "
        "GATEWAY_CHECKPOINT_KEY that signed it)"
    )


# -- tree checkpoints --------------------------------------------------------------------------


class TreeCheckpoint(_Frozen):
    """A signed tree head: the note is the evidence; the other fields repeat what it says."""

    format: Literal["compliance-gateway tree checkpoint v1"] = (
        "compliance-gateway tree checkpoint v1"
    )
    origin: str
    tree_size: int = Field(ge=0)
    root: str  # base64, as in the note
    public_key: str  # hex of the raw Ed25519 key that signed it (which the reader must trust)
    note: str
    # RFC 3161 tokens over the note's text (audit.timestamp); left out of the file when none
    timestamps: tuple[TimeStamp, ...] = ()

    @property
    def head(self) -> TreeHead:
        return TreeHead(self.tree_size, base64.b64decode(self.root))


def sign_checkpoint(store_id: str, head: TreeHead, seed: bytes) -> TreeCheckpoint:
    name = origin(store_id)
    root = base64.b64encode(head.root).decode("ascii")
    public = _public_raw(Ed25519PrivateKey.from_private_bytes(seed).public_key())
    return TreeCheckpoint(
        origin=name,
        tree_size=head.size,
        root=root,
        public_key=public.hex(),
        note=sign_note(f"{name}\n{head.size}\n{root}\n", name, seed),
    )


def _raw_keys(public_keys: Iterable[str]) -> list[bytes]:
    try:
        return [bytes.fromhex(key.public_key) for key in TrustedKeys.of(public_keys)]
    except UnusableKey as exc:
        raise ReceiptError(f"a trusted public key is not usable: {exc}") from None


def checked_checkpoint(cp: TreeCheckpoint, trusted: Iterable[str]) -> TreeHead:
    """The tree head ``cp`` signs, once its note verifies under a ``trusted`` key (hex) and
    says what the file's fields say; :class:`ProofError` otherwise."""
    text, _ = open_note(cp.note, cp.origin, _raw_keys(trusted))
    lines = text[:-1].split("\n")
    if len(lines) < 3 or lines[0] != cp.origin:
        raise ProofError("the checkpoint note is not a tree checkpoint of this origin")
    size_text, root_text = lines[1], lines[2]
    if not size_text.isdigit() or (size_text != "0" and size_text.startswith("0")):
        raise ProofError(f"the checkpoint's tree size {size_text[:40]!r} is not a number")
    try:
        root = base64.b64decode(root_text, validate=True)
    except (binascii.Error, ValueError):
        root = b""
    if len(root) != 32:
        raise ProofError("the checkpoint's root is not a base64 SHA-256 hash")
    if int(size_text) != cp.tree_size or root_text != cp.root:
        raise ProofError(
            "the file's tree_size or root differs from its signed note: the file was altered"
        )
    return TreeHead(cp.tree_size, root)


# -- receipts ----------------------------------------------------------------------------------


class ProvenEvent(_Frozen):
    seq: int = Field(ge=1)
    kind: str
    prev_hash: str
    hash: str
    body: str  # the hashed bytes as UTF-8 text
    inclusion_proof: tuple[str, ...]  # base64 hashes, leaf to root


class Receipt(_Frozen):
    format: Literal["compliance-gateway receipt v1"] = RECEIPT_FORMAT
    request_id: str
    checkpoint: TreeCheckpoint
    events: tuple[ProvenEvent, ...]


class ReceiptReport(_Frozen):
    ok: bool
    request_id: str
    origin: str
    tree_size: int
    root: str
    signer: str  # hex public key the file names; trusted only when ok
    events_checked: int
    seqs: tuple[int, ...]
    witnesses: tuple[WitnessCheck, ...] = ()  # each witness key the reader required
    timestamps: tuple[TimeStampCheck, ...] = ()  # each token, when TSA certificates are given
    problems: tuple[str, ...]


class ConsistencyReport(_Frozen):
    ok: bool
    origin: str
    old_size: int
    new_size: int
    log_size: int | None  # events in the log when checked
    proof: tuple[str, ...]  # base64, RFC 9162 order: anyone can re-check it offline
    old_witnesses: tuple[WitnessCheck, ...] = ()
    new_witnesses: tuple[WitnessCheck, ...] = ()
    old_timestamps: tuple[TimeStampCheck, ...] = ()
    new_timestamps: tuple[TimeStampCheck, ...] = ()
    problems: tuple[str, ...]


def dumps(value: Receipt | TreeCheckpoint) -> str:
    data = value.model_dump(mode="json")
    cp = data["checkpoint"] if isinstance(value, Receipt) else data
    if not cp["timestamps"]:  # a file without tokens keeps the shape older readers accept
        del cp["timestamps"]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _load(text: str, what: str) -> dict[str, Any]:
    if len(text) > MAX_FILE:
        raise ReceiptError(f"the {what} is over {MAX_FILE // 2**20} MB.")
    try:
        value = bounded_loads(text.encode("utf-8"))
    except (UnreadableJSON, ValueError) as exc:
        raise ReceiptError(f"the {what} is not JSON ({exc}).") from None
    if not isinstance(value, dict):
        raise ReceiptError(f"the {what} is not a JSON object.")
    return value


def load_receipt(text: str) -> Receipt:
    try:
        return Receipt.model_validate(_load(text, "receipt"))
    except ValidationError as exc:
        raise ReceiptError(
            f"the file is not a gateway receipt ({exc.error_count()} problem(s), first: "
            f"{exc.errors()[0]['msg']} at {'.'.join(map(str, exc.errors()[0]['loc']))}).",
            hint="Pass the file written by `gateway audit prove`.",
        ) from None


def load_checkpoint(text: str) -> TreeCheckpoint:
    """A tree checkpoint file, or the checkpoint inside a receipt."""
    value = _load(text, "checkpoint")
    if value.get("format") == RECEIPT_FORMAT:
        return load_receipt(text).checkpoint
    try:
        return TreeCheckpoint.model_validate(value)
    except ValidationError as exc:
        raise ReceiptError(
            f"the file is not a gateway tree checkpoint ({exc.errors()[0]['msg']}).",
            hint="Pass a file written by `gateway audit tree-head` or `gateway audit prove`.",
        ) from None


def log_leaves(store: AuditStore, upto: int) -> Iterator[bytes]:
    """The leaf hashes of events 1..``upto``, streamed in keyset pages of the hash column;
    :class:`ReceiptError` if a seq is missing or a hash is not one (run verify)."""
    reader = store._backend.reader  # the store's read engine; only the hash column is read
    last = 0
    while last < upto:
        with reader.connect() as conn:
            rows = conn.execute(
                select(Event.seq, Event.hash)
                .where(Event.seq > last, Event.seq <= upto)
                .order_by(Event.seq)
                .limit(LEAF_PAGE)
            ).all()
        if not rows:
            return
        for seq, event_hash in rows:
            if seq != last + 1:
                raise ReceiptError(
                    f"seq {last + 1} is missing from the log: its Merkle tree cannot be built.",
                    hint="Run `gateway audit verify`; the log is not whole.",
                )
            try:
                yield event_leaf(str(event_hash))
            except ValueError:
                raise ReceiptError(
                    f"the hash of seq {seq} is not a sha256 hash.",
                    hint="Run `gateway audit verify`; the row was altered.",
                ) from None
            last = seq


def tree_hashes(
    store: AuditStore, size: int, wanted: Iterable[Range] = (), roots_at: Iterable[int] = ()
) -> Scan:
    """The hashes of the ``wanted`` subtrees of the tree of ``size`` leaves and the roots of
    the trees of each size in ``roots_at``: from the stored tree, extended to ``size`` first
    (O(log n) reads), or streamed from the log if the stored tree cannot be written."""
    want, sizes = set(wanted), set(roots_at)
    state = MerkleState(store._backend)
    try:
        state.extend(size)
    except SQLAlchemyError:  # a read-only file or role: the log itself still answers
        return scan(log_leaves(store, size), size, want, sizes)
    hashes = state.subtrees(want | {(0, s) for s in sizes if s}, size)
    roots = {s: hashes[(0, s)] if s else EMPTY_ROOT for s in sizes}
    return Scan(size, {r: hashes[r] for r in want}, roots)


def stored_consistency_proof(store: AuditStore, old_size: int, new_size: int) -> list[bytes]:
    """The consistency proof from the log's tree of ``old_size`` events to its tree of
    ``new_size``, from the stored tree (a witness checks it against the two roots)."""
    if new_size > store.head()[0]:
        raise ReceiptError(
            f"the log holds {store.head()[0]} events, fewer than the checkpoint's {new_size}: "
            "it was truncated or rolled back, or this is another copy of it"
        )
    path = consistency_path(old_size, new_size)
    hashes = tree_hashes(store, new_size, path).hashes
    return [hashes[r] for r in path]


def rebuild_tree(store: AuditStore) -> int:
    """Recompute the stored tree from the log; returns the number of leaves now stored."""
    return MerkleState(store._backend).rebuild(store.head()[0])


def signed_head(store: AuditStore, seed: bytes) -> TreeCheckpoint:
    """Sign the tree head of the whole log as it is now."""
    size = store.head()[0]
    return sign_checkpoint(store.store_id, _head(store, size), seed)


def _head(store: AuditStore, size: int) -> TreeHead:
    return TreeHead(size, tree_hashes(store, size, roots_at=(size,)).roots[size])


def make_receipt(store: AuditStore, request_id: str, seed: bytes) -> Receipt:
    """Inclusion proofs of every event of ``request_id`` against a checkpoint of the whole
    log, signed now with the checkpoint key ``seed``; one pass over the hash column."""
    events = store.events_for_request(request_id)
    if not events:
        raise NotFound(f"there is no request {request_id!r} in the audit log.")
    for event in events:
        if link_hash(event.prev_hash, event.body) != event.hash:
            raise ReceiptError(
                f"event seq {event.seq} of the request does not hash to its stored hash: it "
                "was altered, and no receipt is signed for it.",
                hint="Run `gateway audit verify`.",
            )
    size = store.head()[0]
    paths = {e.seq: inclusion_path(e.seq - 1, size) for e in events}
    found = tree_hashes(store, size, {r for p in paths.values() for r in p}, roots_at=(size,))
    root = found.roots[size]
    for event in events:  # the stored tree is not trusted: nothing unproven is signed
        try:
            proof = [found.hashes[r] for r in paths[event.seq]]
            verify_inclusion(event_leaf(event.hash), event.seq - 1, size, proof, root)
        except (ProofError, ValueError):
            raise ReceiptError(
                f"the stored Merkle tree gives event seq {event.seq} a proof that does not "
                f"lead to the root of the tree of {size} events: a stored node was altered, "
                "and no receipt is signed.",
                hint="Run `gateway audit tree-head --rebuild` to recompute it from the log.",
            ) from None
    checkpoint = sign_checkpoint(store.store_id, TreeHead(size, root), seed)
    proven = tuple(
        ProvenEvent(
            seq=e.seq,
            kind=e.kind.value,
            prev_hash=e.prev_hash,
            hash=e.hash,
            body=e.body.decode("utf-8"),
            inclusion_proof=tuple(_b64(found.hashes[r]) for r in paths[e.seq]),
        )
        for e in events
    )
    return Receipt(request_id=request_id, checkpoint=checkpoint, events=proven)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _witness_problems(checks: Iterable[WitnessCheck], label: str) -> list[str]:
    return [f"{label}witness {c.name}: {c.problem}" for c in checks if c.problem]


def _time_stamps(
    cp: TreeCheckpoint, roots: Sequence[Certificate], label: str
) -> tuple[tuple[TimeStampCheck, ...], list[str]]:
    """The checks of ``cp``'s tokens when TSA ``roots`` are given, and the problems: at
    least one token must check out (tokens from TSAs not trusted are reported, and are
    no problem when another checks out)."""
    if not roots:
        return (), []
    try:
        checks = tuple(check_time_stamps(cp.note, cp.timestamps, roots))
    except CheckpointError as exc:
        return (), [f"{label}{exc.message}"]
    if not checks:
        return checks, [
            f"{label}the checkpoint carries no time-stamp (run `gateway audit timestamp`)"
        ]
    if any(c.ok for c in checks):
        return checks, []
    return checks, [f"{label}{c.problem}" for c in checks]


def check_receipt(
    text: str,
    trusted: Iterable[str],
    witnesses: Iterable[Witness] = (),
    tsa_roots: Sequence[Certificate] = (),
) -> ReceiptReport:
    """Check a receipt with nothing but the trusted public keys (hex): the checkpoint's
    signature, the cosignature of each required witness, then each event's hash, body and
    inclusion proof against the signed root."""
    receipt = load_receipt(text)
    cp = receipt.checkpoint
    problems: list[str] = []
    try:
        head: TreeHead | None = checked_checkpoint(cp, trusted)
    except ProofError as exc:
        problems.append(f"checkpoint: {exc}")
        head = None
    cosigned = tuple(check_cosignatures(cp.note, witnesses))
    problems += _witness_problems(cosigned, "checkpoint: ")
    stamped, stamp_problems = _time_stamps(cp, tsa_roots, "checkpoint: ")
    problems += stamp_problems
    if not receipt.events:
        problems.append("the receipt proves no event")
    for event in receipt.events:
        problems += [f"event seq {event.seq}: {p}" for p in _event_problems(receipt, event, head)]
    return ReceiptReport(
        ok=not problems,
        request_id=receipt.request_id,
        origin=cp.origin,
        tree_size=cp.tree_size,
        root=cp.root,
        signer=cp.public_key,
        events_checked=len(receipt.events),
        seqs=tuple(e.seq for e in receipt.events),
        witnesses=cosigned,
        timestamps=stamped,
        problems=tuple(problems),
    )


def _event_problems(receipt: Receipt, event: ProvenEvent, head: TreeHead | None) -> list[str]:
    body = event.body.encode("utf-8")
    try:
        recomputed = link_hash(event.prev_hash, body)
    except UnicodeEncodeError:
        return ["its prev_hash is not a hash"]
    if recomputed != event.hash:
        return [
            f"sha256(prev_hash || body) is {recomputed}, not the hash {event.hash[:80]}: the "
            "body or prev_hash was altered"
        ]
    problems = []
    try:
        parsed = bounded_loads(body)
    except (UnreadableJSON, ValueError):
        parsed = None
    if not isinstance(parsed, dict) or parsed.get("seq") != event.seq:
        problems.append("its body is not the body of this seq")
    elif parsed.get("request_id") != receipt.request_id:
        problems.append(f"its body is of request {str(parsed.get('request_id'))[:80]!r}")
    elif parsed.get("kind") != event.kind:
        problems.append(f"its body is a {str(parsed.get('kind'))[:40]!r} event, not {event.kind}")
    if head is None:
        return [*problems, "not checked against a root: the checkpoint did not check out"]
    if event.seq > head.size:
        return [*problems, f"it is past the checkpoint's tree of {head.size} events"]
    proof = [_unb64(p) for p in event.inclusion_proof]
    try:
        verify_inclusion(event_leaf(event.hash), event.seq - 1, head.size, proof, head.root)
    except (ProofError, ValueError) as exc:
        problems.append(f"its inclusion proof is refused: {exc}")
    return problems


def check_consistency(
    store: AuditStore,
    old_text: str,
    new_text: str,
    trusted: Iterable[str],
    witnesses: Iterable[Witness] = (),
    tsa_roots: Sequence[Certificate] = (),
) -> ConsistencyReport:
    """Whether the tree NEW signs extends the tree OLD signs, with the consistency proof
    made from this log (and checked as any offline verifier would), and whether the log
    still holds both trees; both carry a valid cosignature of each required witness.
    Refuses a fork, a rewrite and a truncation with the reason."""
    keys, required = list(trusted), list(witnesses)
    old_cp, new_cp = load_checkpoint(old_text), load_checkpoint(new_text)
    problems: list[str] = []
    heads: list[TreeHead] = []
    for label, cp in (("OLD", old_cp), ("NEW", new_cp)):
        try:
            heads.append(checked_checkpoint(cp, keys))
        except ProofError as exc:
            problems.append(f"{label}: {exc}")
    old_cosigned = tuple(check_cosignatures(old_cp.note, required))
    new_cosigned = tuple(check_cosignatures(new_cp.note, required))
    problems += _witness_problems(old_cosigned, "OLD: ")
    problems += _witness_problems(new_cosigned, "NEW: ")
    old_stamped, old_stamp_problems = _time_stamps(old_cp, tsa_roots, "OLD: ")
    new_stamped, new_stamp_problems = _time_stamps(new_cp, tsa_roots, "NEW: ")
    problems += old_stamp_problems + new_stamp_problems
    log_size = store.head()[0]

    def report(proof: Iterable[bytes] = ()) -> ConsistencyReport:
        return ConsistencyReport(
            ok=not problems,
            origin=new_cp.origin,
            old_size=old_cp.tree_size,
            new_size=new_cp.tree_size,
            log_size=log_size,
            proof=tuple(_b64(p) for p in proof),
            old_witnesses=old_cosigned,
            new_witnesses=new_cosigned,
            old_timestamps=old_stamped,
            new_timestamps=new_stamped,
            problems=tuple(problems),
        )

    if old_cp.origin != new_cp.origin:
        problems.append(f"OLD is of log {old_cp.origin} and NEW of {new_cp.origin}")
    if new_cp.origin != origin(store.store_id):
        problems.append(f"the checkpoints are of log {new_cp.origin}, not this one")
    if problems:
        return report()
    old, new = heads
    if old.size > new.size:
        problems.append(
            f"NEW ({new.size} events) is smaller than OLD ({old.size}): a log that shrank was "
            "truncated or rolled back (or the files are given the other way round)"
        )
    if log_size < max(old.size, new.size):
        problems.append(
            f"the log holds {log_size} events, but a checkpoint was signed when it held "
            f"{max(old.size, new.size)}: events were removed (truncation or rollback)"
        )
    if problems:
        return report()
    path = consistency_path(old.size, new.size)
    found = scan(log_leaves(store, new.size), new.size, path, roots_at=(old.size, new.size))
    proof = [found.hashes[r] for r in path]
    try:
        verify_consistency(old.size, new.size, proof, old.root, new.root)
    except ProofError as exc:
        problems.append(f"NEW does not extend OLD: {exc}")
    if found.roots[new.size] != new.root:
        problems.append(
            f"the log's first {new.size} events are no longer the tree NEW signed: "
            + (
                f"events after seq {old.size} were rewritten"
                if found.roots[old.size] == old.root
                else "the log was rewritten"
            )
        )
    elif found.roots[old.size] != old.root:
        problems.append(
            f"the log NEW signs does not start with the {old.size} events OLD signed: the two "
            "checkpoints are of a forked log"
        )
    return report(proof)
