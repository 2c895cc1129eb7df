"""Checking receipts and pairs of tree checkpoints: what a reader (offline) and an auditor
(with the log) run, and the reports they get.

    report = check_receipt(text, [public_key_hex])            # no database: the file alone
    report = check_receipt(text, keys, [Witness.parse("w=<hex>")], tsa_roots)
    report = check_consistency(store, old_text, new_text, [public_key_hex])

A receipt's check recomputes each event's hash from ``prev_hash`` and the body, the leaf from
the hash, the root from the inclusion proof, and compares it with the root the checkpoint's
note signs; an altered body, proof node, root, size or signature is refused with the reason.
Each witness the reader requires must have cosigned the note (audit.proofs.cosignature); with TSA
certificates, a time-stamp by a TSA they certify is required (audit.proofs.timestamp). A report
that does not check out is ``ok`` false with one reason per problem, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cryptography.x509 import Certificate

from audit.errors import CheckpointError
from audit.proofs.cosignature import Witness, WitnessCheck, check_cosignatures
from audit.proofs.merkle import (
    ProofError,
    TreeHead,
    consistency_path,
    event_leaf,
    scan,
    verify_consistency,
    verify_inclusion,
)
from audit.proofs.receipt_files import (
    ORIGIN_PREFIX,
    ProvenEvent,
    Receipt,
    TreeCheckpoint,
    _b64,
    _unb64,
    checked_checkpoint,
    load_checkpoint,
    load_receipt,
    origin,
)
from audit.proofs.receipt_files import _Frozen as _Frozen  # one model config for the file formats
from audit.proofs.timestamp import TimeStampCheck, check_time_stamps
from audit.proofs.tree import log_leaves
from audit.store import AuditStore
from audit.store.bounded import UnreadableJSON
from audit.store.bounded import loads as bounded_loads
from audit.store.chain import link_hash
from audit.store.signing import SEQUENCED_PREV, TrustedKeys

__all__ = ["ConsistencyReport", "ReceiptReport", "check_consistency", "check_receipt"]


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
    # Whether each event's record signature was checked, against the record keys given.
    record_signatures_checked: bool = False
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
    record_keys: Iterable[str] = (),
) -> ReceiptReport:
    """Check a receipt with nothing but the trusted public keys (hex): the checkpoint's
    signature, the cosignature of each required witness, then each event's hash, body and
    inclusion proof against the signed root; with ``record_keys`` (the trusted record public
    keys), also each event's record signature."""
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
    signers = TrustedKeys.of(record_keys)
    store_id = cp.origin.removeprefix(ORIGIN_PREFIX)
    for event in receipt.events:
        found = _event_problems(receipt, event, head)
        if signers:
            found += _signature_problems(event, signers, store_id)
        problems += [f"event seq {event.seq}: {p}" for p in found]
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
        record_signatures_checked=bool(signers),
        problems=tuple(problems),
    )


def _signature_problems(event: ProvenEvent, signers: TrustedKeys, store_id: str) -> list[str]:
    """Whether a trusted record key signed the event (a format-2 event's signature names
    its log, whose id the checkpoint's origin carries)."""
    reason = signers.check(
        event.key_id,
        event.signature,
        event.hash,
        sequenced=event.prev_hash == SEQUENCED_PREV,
        store_id=store_id,
    )
    return [f"its record signature: {reason}"] if reason is not None else []


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
