"""Evidence: what auditors, compliance officers and model-risk teams do with the record.

    with Auditing.open(settings) as auditing:
        for summary in auditing.requests(EventFilter(task="compliance_review")): ...
        report = auditing.verify()

Each facade opens the audit store from ``Settings`` and speaks the gateway's error tree:
listing, reading and verifying the log (``Auditing``), policy approvals and the sign-off
sheet, Merkle receipts and consistency proofs, witnesses, RFC 3161 time-stamps, the format-2
integrator, and offline verification of an export.

Every name loads on first use (its module then), so that a command that needs one facade
(`gateway audit list`: Auditing) does not import the others' dependencies.
"""

import typing as _typing

from audit.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from gateway.evidence._approvals import (
        ApprovalStatus,
        approval_draft,
        approval_status,
        check_approvals,
        pinned_for_start,
        sign_approval,
        trusted_approvers,
        withhold_unapproved,
    )
    from gateway.evidence._audit_content import RecordedContent
    from gateway.evidence._auditing import (
        Auditing,
        EventFilter,
        EventKind,
        RequestSummary,
        StoredEvent,
        VerifyReport,
        checkpoint_text,
    )
    from gateway.evidence._checkpoint_rotation import (
        CheckpointEras,
        CheckpointRotation,
        rotate_checkpoint_key,
    )
    from gateway.evidence._database import grant_role, schema_status, upgrade_schema
    from gateway.evidence._erasing import Erased, Erasing, ErasureReport, PurgeReport, PurgeRow
    from gateway.evidence._export_verify import ExportVerifyReport, verify_export
    from gateway.evidence._holds import Hold, HoldScope
    from gateway.evidence._integrating import Step, integrate
    from gateway.evidence._key_listing import (
        CheckpointKeyInfo,
        KeyListing,
        RecordKeyInfo,
        key_listing,
    )
    from gateway.evidence._key_rotation import KeyRotation, rotate_record_key
    from gateway.evidence._listing import LISTED_STATUSES, fingerprint_prefix, wanted
    from gateway.evidence._pack_record import RecordedPack, record_pack
    from gateway.evidence._policy_records import (
        ApprovalRecord,
        PolicyRecords,
        PolicyVersion,
        SignoffHistory,
    )
    from gateway.evidence._receipts import (
        ConsistencyReport,
        ReceiptReport,
        TimeStampCheck,
        WitnessCheck,
        check_consistency,
        check_receipt,
        note_verifier_key,
        prove,
        receipt_text,
        tree_checkpoint_text,
        tree_head,
    )
    from gateway.evidence._refusals import record_refused_tasks
    from gateway.evidence._signoff_sheet import signoff_sheet
    from gateway.evidence._timestamping import timestamp
    from gateway.evidence._usage import GroupBy, UsageReport, UsageRow, answer_cost
    from gateway.evidence._witnessing import WitnessOutcome, witness

# Where each name that loads on first use lives.
_LAZY = {
    "ApprovalStatus": "gateway.evidence._approvals",
    "approval_draft": "gateway.evidence._approvals",
    "approval_status": "gateway.evidence._approvals",
    "check_approvals": "gateway.evidence._approvals",
    "pinned_for_start": "gateway.evidence._approvals",
    "sign_approval": "gateway.evidence._approvals",
    "trusted_approvers": "gateway.evidence._approvals",
    "withhold_unapproved": "gateway.evidence._approvals",
    "RecordedContent": "gateway.evidence._audit_content",
    "Auditing": "gateway.evidence._auditing",
    "EventFilter": "gateway.evidence._auditing",
    "EventKind": "gateway.evidence._auditing",
    "RequestSummary": "gateway.evidence._auditing",
    "StoredEvent": "gateway.evidence._auditing",
    "VerifyReport": "gateway.evidence._auditing",
    "checkpoint_text": "gateway.evidence._auditing",
    "CheckpointEras": "gateway.evidence._checkpoint_rotation",
    "CheckpointRotation": "gateway.evidence._checkpoint_rotation",
    "rotate_checkpoint_key": "gateway.evidence._checkpoint_rotation",
    "grant_role": "gateway.evidence._database",
    "schema_status": "gateway.evidence._database",
    "upgrade_schema": "gateway.evidence._database",
    "Erased": "gateway.evidence._erasing",
    "Erasing": "gateway.evidence._erasing",
    "ErasureReport": "gateway.evidence._erasing",
    "PurgeReport": "gateway.evidence._erasing",
    "PurgeRow": "gateway.evidence._erasing",
    "ExportVerifyReport": "gateway.evidence._export_verify",
    "verify_export": "gateway.evidence._export_verify",
    "Hold": "gateway.evidence._holds",
    "HoldScope": "gateway.evidence._holds",
    "Step": "gateway.evidence._integrating",
    "integrate": "gateway.evidence._integrating",
    "CheckpointKeyInfo": "gateway.evidence._key_listing",
    "KeyListing": "gateway.evidence._key_listing",
    "RecordKeyInfo": "gateway.evidence._key_listing",
    "key_listing": "gateway.evidence._key_listing",
    "KeyRotation": "gateway.evidence._key_rotation",
    "rotate_record_key": "gateway.evidence._key_rotation",
    "LISTED_STATUSES": "gateway.evidence._listing",
    "fingerprint_prefix": "gateway.evidence._listing",
    "wanted": "gateway.evidence._listing",
    "RecordedPack": "gateway.evidence._pack_record",
    "record_pack": "gateway.evidence._pack_record",
    "ApprovalRecord": "gateway.evidence._policy_records",
    "PolicyRecords": "gateway.evidence._policy_records",
    "PolicyVersion": "gateway.evidence._policy_records",
    "SignoffHistory": "gateway.evidence._policy_records",
    "ConsistencyReport": "gateway.evidence._receipts",
    "ReceiptReport": "gateway.evidence._receipts",
    "TimeStampCheck": "gateway.evidence._receipts",
    "WitnessCheck": "gateway.evidence._receipts",
    "check_consistency": "gateway.evidence._receipts",
    "check_receipt": "gateway.evidence._receipts",
    "note_verifier_key": "gateway.evidence._receipts",
    "prove": "gateway.evidence._receipts",
    "receipt_text": "gateway.evidence._receipts",
    "tree_checkpoint_text": "gateway.evidence._receipts",
    "tree_head": "gateway.evidence._receipts",
    "record_refused_tasks": "gateway.evidence._refusals",
    "signoff_sheet": "gateway.evidence._signoff_sheet",
    "timestamp": "gateway.evidence._timestamping",
    "GroupBy": "gateway.evidence._usage",
    "UsageReport": "gateway.evidence._usage",
    "UsageRow": "gateway.evidence._usage",
    "answer_cost": "gateway.evidence._usage",
    "WitnessOutcome": "gateway.evidence._witnessing",
    "witness": "gateway.evidence._witnessing",
}

__all__ = [
    "LISTED_STATUSES",
    "ApprovalRecord",
    "ApprovalStatus",
    "Auditing",
    "CheckpointEras",
    "CheckpointKeyInfo",
    "CheckpointRotation",
    "ConsistencyReport",
    "Erased",
    "Erasing",
    "ErasureReport",
    "EventFilter",
    "EventKind",
    "ExportVerifyReport",
    "GroupBy",
    "Hold",
    "HoldScope",
    "KeyListing",
    "KeyRotation",
    "PolicyRecords",
    "PolicyVersion",
    "PurgeReport",
    "PurgeRow",
    "ReceiptReport",
    "RecordKeyInfo",
    "RecordedContent",
    "RecordedPack",
    "RequestSummary",
    "SignoffHistory",
    "Step",
    "StoredEvent",
    "TimeStampCheck",
    "UsageReport",
    "UsageRow",
    "VerifyReport",
    "WitnessCheck",
    "WitnessOutcome",
    "answer_cost",
    "approval_draft",
    "approval_status",
    "check_approvals",
    "check_consistency",
    "check_receipt",
    "checkpoint_text",
    "fingerprint_prefix",
    "grant_role",
    "integrate",
    "key_listing",
    "note_verifier_key",
    "pinned_for_start",
    "prove",
    "receipt_text",
    "record_pack",
    "record_refused_tasks",
    "rotate_checkpoint_key",
    "rotate_record_key",
    "schema_status",
    "sign_approval",
    "signoff_sheet",
    "timestamp",
    "tree_checkpoint_text",
    "tree_head",
    "trusted_approvers",
    "upgrade_schema",
    "verify_export",
    "wanted",
    "withhold_unapproved",
    "witness",
]


__getattr__ = _lazy_names(__name__, _LAZY)
