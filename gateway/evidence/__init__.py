"""Evidence: what auditors, compliance officers and model-risk teams do with the record.

    with Auditing.open(settings) as auditing:
        for summary in auditing.requests(EventFilter(task="compliance_review")): ...
        report = auditing.verify()

Each facade opens the audit store from ``Settings`` and speaks the gateway's error tree:
listing, reading and verifying the log (``Auditing``), policy approvals and the sign-off
sheet, Merkle receipts and consistency proofs, witnesses, RFC 3161 time-stamps, the format-2
integrator, and offline verification of an export.
"""

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
from gateway.evidence._key_listing import CheckpointKeyInfo, KeyListing, RecordKeyInfo, key_listing
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
