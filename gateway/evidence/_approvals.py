"""Four-eyes sign-off of policies: approvers sign a task's exact fingerprint, and a gateway
that requires N approvals refuses a task whose current fingerprint has fewer.

    approval = sign_approval(key_text, task="compliance_review", fingerprint=fp, approver="a.b")
    store.append(approval_draft(approval, policy))               # an APPROVAL event
    check_approvals(store, policies, required=2)                 # PolicyLoadError if short
    withhold_unapproved(store, policies, required=2)             # a gateway: refuse those only

An approval is an Ed25519 signature by the approver's key (``GATEWAY_APPROVER_KEY``) over a
domain tag and the canonical JSON of ``{task, fingerprint, approver}``, recorded in the audit
log as an APPROVAL event that carries the signature, the approver's public key and the policy
it approved. Counted are approvals of the *exact* fingerprint (any change to the policy needs
new ones), each with a signature that checks out under the key it names, by distinct
approvers: two names with one key count once. With ``trusted_approvers`` (name to public
key), only pinned approvers count; with ``signature`` (the read path's record-signature
check), only APPROVAL events written by a trusted gateway count.

Pinning is what makes four eyes hold against someone who can write the log (or holds any
approver key): without it, an approval signed by *some* key under *any* name counts. The pins
come from settings (``trusted_approvers`` / ``trusted_approvers_file``), read by
:func:`trusted_approvers`, and every check of approvals takes them: the gateway at start, and
``policy review``, ``policy show`` and the sign-off sheet through the auditing facade.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import tomllib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from audit import AuditStore, EventDraft, EventKind, StoredEvent
from audit.canonical import canonical_bytes
from audit.store.signing import TrustedKeys, UnusableKey, key_id
from audit.verify.authenticity import SignatureCheck, check_event
from gateway._inputs import check_name
from gateway._log import log
from gateway._store_adapter import StoreAdapter
from gateway.errors import ConfigurationError, InputError, PolicyLoadError, PolicyNotApproved
from gateway.policy import ROUTES_TASK
from gateway.settings import Settings

if TYPE_CHECKING:  # loading policies (jsonschema, the review rules) is the caller's import
    from gateway.policy import Policy, PolicySet

__all__ = [
    "Approval",
    "ApprovalStatus",
    "approval_draft",
    "approval_status",
    "check_approvals",
    "pinned_for_start",
    "refuse_unsound",
    "sign_approval",
    "trusted_approvers",
    "unapproved",
    "withhold_unapproved",
]

DOMAIN = b"compliance-gateway policy approval v1\n"
PINS_HINT = (
    "List each approver once with their Ed25519 public key (32 bytes as 64 hex characters): "
    'in GATEWAY_TRUSTED_APPROVERS_FILE as TOML (j.smith = "<hex>") or a JSON object, or in '
    "GATEWAY_TRUSTED_APPROVERS as name=<hex>, comma-separated."
)
KEY_HINT = (
    "Set GATEWAY_APPROVER_KEY to the approver's Ed25519 private key: 32 bytes as 64 hex "
    "characters (or base64), kept by the approver, never in the database."
)


@dataclass(frozen=True)
class Approval:
    task: str
    fingerprint: str
    approver: str
    public_key: str  # hex of the raw Ed25519 public key
    signature: str  # base64

    @property
    def key_id(self) -> str:
        return key_id(bytes.fromhex(self.public_key))


@dataclass(frozen=True)
class ApprovalStatus:
    """Who has approved one task's exact fingerprint, and what did not count."""

    task: str
    fingerprint: str
    approvers: tuple[str, ...]  # distinct, in the order they approved
    seqs: tuple[int, ...]
    rejected: tuple[str, ...] = field(default=())  # one line per approval that did not count
    pinned: bool = False  # whether only approvers' pinned keys counted (trusted_approvers)

    def enough(self, required: int) -> bool:
        return len(self.approvers) >= required


def _message(task: str, fingerprint: str, approver: str) -> bytes:
    body = {"approver": approver, "fingerprint": fingerprint, "task": task}
    return DOMAIN + canonical_bytes(body)


def _private_key(text: str) -> Ed25519PrivateKey:
    text = text.strip()
    raw: bytes | None = None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != 32:
        raise ConfigurationError("the approver key (GATEWAY_APPROVER_KEY) is not usable.",
                                 hint=KEY_HINT)  # fmt: skip
    return Ed25519PrivateKey.from_private_bytes(raw)


def sign_approval(key_text: str, *, task: str, fingerprint: str, approver: str) -> Approval:
    """``approver``'s signature of ``task``'s ``fingerprint`` with the key in ``key_text``."""
    approver = check_name(approver, "approver", example="j.smith") or ""
    private = _private_key(key_text)
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    signature = private.sign(_message(task, fingerprint, approver))
    return Approval(task, fingerprint, approver, public.hex(), base64.b64encode(signature).decode())


def refuse_unsound(
    approval: Approval, trusted_approvers: Mapping[str, str] | None, reviewed: str | None
) -> None:
    """Refuse (:class:`InputError`), before anything is recorded, an approval of another
    version than the ``reviewed`` fingerprint, or signed by a key other than the one pinned
    for its approver: it would never count, and must never read as an approval."""
    what = f"{approval.task!r} as {approval.approver!r}"
    if reviewed is not None and reviewed != approval.fingerprint:
        raise InputError(
            f"not approved {what}: the folder's version is {approval.fingerprint}, not the "
            f"reviewed {reviewed}; nothing was signed or recorded.",
            hint="Review the folder's version ('gateway policy show TASK') and approve that.",
        )
    if trusted_approvers is None:
        return
    pinned = trusted_approvers.get(approval.approver)
    if pinned is None:
        why = f"{approval.approver!r} is not a pinned approver"
    elif pinned != approval.public_key:
        why = (
            f"the key {approval.key_id} is not the key pinned for {approval.approver!r} "
            f"({key_id(bytes.fromhex(pinned))})"
        )
    else:
        return
    raise InputError(
        f"not approved {what}: {why}; nothing was recorded.",
        hint="Approve under your own name with your own key (GATEWAY_APPROVER_KEY), or ask "
        "for your public key to be pinned (GATEWAY_TRUSTED_APPROVERS_FILE).",
    )


def approval_draft(approval: Approval, policy: Policy | Mapping[str, Any]) -> EventDraft:
    """The APPROVAL event: who signed which fingerprint, with the approved policy stored
    (or the approved content: the routing table's, see PolicySet.approvable)."""
    return EventDraft(
        kind=EventKind.APPROVAL,
        request_id=f"approval-{uuid.uuid4().hex}",
        task=approval.task,
        caller=approval.approver,
        policy_fingerprint=approval.fingerprint,
        data={
            "task": approval.task,
            "fingerprint": approval.fingerprint,
            "approver": approval.approver,
            "public_key": approval.public_key,
            "key_id": approval.key_id,
            "signature": approval.signature,
        },
        policy_content=dict(policy) if isinstance(policy, Mapping) else policy.content(),
    )


def _why_not(
    event: StoredEvent,
    task: str,
    fingerprint: str,
    trusted_approvers: Mapping[str, str] | None,
    signature: SignatureCheck | None,
    log: StoreAdapter,
) -> str | None:
    """None when ``event`` is a valid approval of ``task``'s ``fingerprint``, else why not."""
    data = event.data
    approver, public_key, sig = data.get("approver"), data.get("public_key"), data.get("signature")
    if data.get("task") != task or data.get("fingerprint") != fingerprint:
        return f"seq {event.seq}: it approves another task or fingerprint than its columns say"
    if not (isinstance(approver, str) and isinstance(public_key, str) and isinstance(sig, str)):
        return f"seq {event.seq}: it names no approver, public key or signature"
    if event.caller != approver:
        return f"seq {event.seq}: its caller column is not its approver"
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key))
        key.verify(base64.b64decode(sig, validate=True), _message(task, fingerprint, approver))
    except (ValueError, binascii.Error, InvalidSignature):
        return f"seq {event.seq}: {approver}'s signature does not check out under its key"
    if trusted_approvers is not None:
        pinned = trusted_approvers.get(approver)
        if pinned is None:
            return f"seq {event.seq}: {approver} is not a pinned approver"
        if pinned != public_key:
            return (
                f"seq {event.seq}: {approver}'s approval is signed by key "
                f"{key_id(bytes.fromhex(public_key))}, not the key pinned for {approver} "
                f"({key_id(bytes.fromhex(pinned))})"
            )
    if signature is not None:
        problems = log.run(check_event, event, signature)
        if problems:
            return problems[0]
    return None


def approval_status(
    store: AuditStore,
    policies: PolicySet,
    *,
    tasks: Iterable[str] | None = None,
    trusted_approvers: Mapping[str, str] | None = None,
    signature: SignatureCheck | None = None,
) -> dict[str, ApprovalStatus]:
    """Each loaded task's approvals of its current fingerprint, and the routing table's
    (tasks that do not load are left out: there is nothing to approve)."""
    signed = policies.approvable()
    current = {
        task: signed[task][0] for task in (tasks if tasks is not None else signed) if task in signed
    }
    found: dict[str, tuple[list[str], list[int], set[str], list[str]]] = {
        task: ([], [], set(), []) for task in current
    }
    log = StoreAdapter(store)
    for event in log.each(AuditStore.iter_events, kind=EventKind.APPROVAL):
        task = event.task or ""
        if task not in current or event.policy_fingerprint != current[task]:
            continue
        names, seqs, keys, rejected = found[task]
        reason = _why_not(event, task, current[task], trusted_approvers, signature, log)
        if reason is not None:
            rejected.append(reason)
            continue
        approver, public_key = event.data["approver"], event.data["public_key"]
        if approver in names or public_key in keys:
            continue  # one approver (or one key) counts once
        names.append(approver)
        keys.add(public_key)
        seqs.append(event.seq)
    pinned = trusted_approvers is not None
    return {
        task: ApprovalStatus(task, current[task], tuple(n), tuple(s), tuple(r), pinned)
        for task, (n, s, _, r) in found.items()
    }


def on_record(log: StoreAdapter, approval: Approval, signature: SignatureCheck | None) -> bool:
    """Whether the log already holds ``approval``'s approver signing its fingerprint with its
    key (pins aside: an approval that does not count is not written again on every run;
    a planted row that fails its record signature does not stop a genuine one)."""
    for event in log.each(AuditStore.iter_events, kind=EventKind.APPROVAL):
        data = event.data
        same = (
            event.task == approval.task
            and event.policy_fingerprint == approval.fingerprint
            and data.get("approver") == approval.approver
            and data.get("public_key") == approval.public_key
        )
        fingerprint = approval.fingerprint
        if same and _why_not(event, approval.task, fingerprint, None, signature, log) is None:
            return True
    return False


def unapproved(
    store: AuditStore,
    policies: PolicySet,
    required: int,
    *,
    trusted_approvers: Mapping[str, str] | None = None,
    signature: SignatureCheck | None = None,
) -> list[ApprovalStatus]:
    """The loaded tasks (and the routing table) whose exact fingerprint has fewer than
    ``required`` approvals by distinct approvers; ``required`` 0 finds none."""
    if required <= 0:
        return []
    status = approval_status(
        store, policies, trusted_approvers=trusted_approvers, signature=signature
    )
    return [s for s in status.values() if not s.enough(required)]


def refusal(
    status: ApprovalStatus, required: int, content: dict[str, Any] | None = None
) -> PolicyNotApproved:
    """The typed refusal of a task whose version lacks approvals (``content``: that
    version's, for the routing table, whose refusals have no policy to record)."""
    return PolicyNotApproved(
        status.task,
        status.fingerprint,
        approvers=status.approvers,
        required=required,
        not_counted=status.rejected,
        content=content,
    )


def withhold_unapproved(
    store: AuditStore,
    policies: PolicySet,
    required: int,
    trusted_approvers: Mapping[str, str] | None = None,
    signature: SignatureCheck | None = None,
) -> list[ApprovalStatus]:
    """Withhold each task whose version lacks approvals (:meth:`PolicySet.withhold`): its
    requests are refused with :class:`PolicyNotApproved` (the pipeline records each as
    REJECTED) while the approved tasks serve; an unapproved routing table routes nothing.
    Logs each refused task; returns their statuses."""
    short = unapproved(
        store, policies, required, trusted_approvers=trusted_approvers, signature=signature
    )
    routes = policies.routes.content() if policies.routes is not None else None
    for status in short:
        content = routes if status.task == ROUTES_TASK else None
        policies.withhold(status.task, functools.partial(refusal, status, required, content))
        log.warning(
            "task_refused_unapproved",
            task=status.task,
            fingerprint=status.fingerprint,
            approvals=len(status.approvers),
            required=required,
        )
    return short


def check_approvals(
    store: AuditStore,
    policies: PolicySet,
    required: int,
    *,
    trusted_approvers: Mapping[str, str] | None = None,
    signature: SignatureCheck | None = None,
) -> None:
    """Refuse (:class:`PolicyLoadError`) when a loaded task's exact fingerprint has fewer than
    ``required`` approvals by distinct approvers; the error names every such task and who
    has approved it so far. ``required`` 0 checks nothing. (A gateway withholds such tasks
    instead: :func:`withhold_unapproved`.)"""
    short = unapproved(
        store, policies, required, trusted_approvers=trusted_approvers, signature=signature
    )
    if not short:
        return
    parts = [
        f"{s.task} ({s.fingerprint}) has {len(s.approvers)} of {required}"
        + (f": approved by {', '.join(s.approvers)}" if s.approvers else ": approved by nobody")
        + (f" (not counted: {'; '.join(s.rejected)})" if s.rejected else "")
        for s in short
    ]
    raise PolicyLoadError(
        f"{len(short)} task(s) lack the {required} approvals by distinct approvers that "
        f"GATEWAY_REQUIRE_APPROVALS asks for: {'; '.join(parts)}.",
        findings=tuple(short),
        hint="Have approvers sign the current version: 'gateway policy approve TASK "
        "--approver NAME' (each with their own GATEWAY_APPROVER_KEY).",
    )


UNPINNED_HINT = (
    "Pin each approver's public key (GATEWAY_TRUSTED_APPROVERS_FILE or "
    "GATEWAY_TRUSTED_APPROVERS), or set GATEWAY_UNSAFE_UNPINNED_APPROVERS=1 to start anyway "
    "(unsafe: one person holding two keys passes four eyes)."
)


def pinned_for_start(settings: Settings) -> dict[str, str] | None:
    """The approver pins a gateway starts with (:func:`trusted_approvers`). With approvals
    required and none pinned, any key signing under any name counts, so one person with two
    keys is "four eyes": that is a :class:`ConfigurationError`, unless the setting named
    unsafe (``unsafe_unpinned_approvers``) allows it, and then a warning at every start."""
    pins = trusted_approvers(settings)
    if settings.require_approvals <= 0 or pins is not None:
        return pins
    if not settings.unsafe_unpinned_approvers:
        raise ConfigurationError(
            f"GATEWAY_REQUIRE_APPROVALS={settings.require_approvals} but no approver keys are "
            "pinned, so any key could approve under any name; the gateway does not start.",
            hint=UNPINNED_HINT,
        )
    log.warning(
        "approvals_unpinned",
        required=settings.require_approvals,
        reason="GATEWAY_UNSAFE_UNPINNED_APPROVERS: any key approving under any name counts",
    )
    return None


def trusted_approvers(settings: Settings) -> dict[str, str] | None:
    """The pinned approver keys (name to public key hex) from ``trusted_approvers`` and the
    file ``trusted_approvers_file``; None when neither is set (approvals are then unpinned).
    A key that is not an Ed25519 public key, or a name pinned to two keys, is a
    :class:`ConfigurationError` naming it."""
    if settings.trusted_approvers is None and settings.trusted_approvers_file is None:
        return None
    pins: dict[str, str] = {}
    sources: list[tuple[str, Mapping[str, object]]] = [
        ("GATEWAY_TRUSTED_APPROVERS", settings.trusted_approvers or {})
    ]
    if settings.trusted_approvers_file is not None:
        path = settings.trusted_approvers_file
        sources.append((repr(str(path)), _read_pins(path)))
    for where, given in sources:
        for name, text in given.items():
            key = _public_key_hex(name, text, where)
            if pins.get(name, key) != key:
                raise ConfigurationError(
                    f"approver {name!r} is pinned to two different keys ({where} differs).",
                    hint=PINS_HINT,
                )
            pins[name] = key
    return pins


def _read_pins(path: Path) -> dict[str, object]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"the trusted approvers file {str(path)!r} cannot be read ({type(exc).__name__}).",
            hint=PINS_HINT,
        ) from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise ConfigurationError(
            f"the trusted approvers file {str(path)!r} is not valid {kind}: {exc}.",
            hint=PINS_HINT,
        ) from None
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"the trusted approvers file {str(path)!r} is not a table of name = key.",
            hint=PINS_HINT,
        )
    return data


def _public_key_hex(name: str, text: object, where: str) -> str:
    try:
        if not isinstance(text, str):
            raise UnusableKey("not a string")
        (key,) = TrustedKeys.of([text])
    except UnusableKey:
        raise ConfigurationError(
            f"the key pinned for approver {name!r} in {where} is not an Ed25519 public key.",
            hint=PINS_HINT,
        ) from None
    return key.public_key
