"""An evidence pack recorded on the log (an EVIDENCE_PACK event), before it is handed out.

    recorded = record_pack(auditing, reviewer="a.auditor", data={"regime": "dora", ...})
    recorded.seq, recorded.store_id

The pack's builder (gateway.packs) says what the pack holds; this only appends the signed
event, so that the log shows who took which evidence for which period, and the digests of
the files let anyone tell the pack they hold is the one recorded.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from audit import AuditStore, EventDraft, EventKind
from gateway.evidence._auditing import Auditing

__all__ = ["RecordedPack", "record_pack"]


class RecordedPack(NamedTuple):
    seq: int  # the EVIDENCE_PACK event
    store_id: str  # the audit database it is recorded in


def record_pack(auditing: Auditing, *, reviewer: str, data: dict[str, Any]) -> RecordedPack:
    """Append the EVIDENCE_PACK event."""
    log = auditing._writing()  # the facade's own writer: this module is its package's
    draft = EventDraft(
        kind=EventKind.EVIDENCE_PACK,
        request_id=f"evidence-{uuid.uuid4().hex}",
        caller=reviewer,
        data=data,
    )
    appended = log.run(AuditStore.append, draft)
    return RecordedPack(appended.seq, log.store.store_id)
