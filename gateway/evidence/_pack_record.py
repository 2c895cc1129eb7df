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

from audit import EventDraft, EventKind
from gateway._audit_errors import translated
from gateway.evidence._auditing import Auditing

__all__ = ["RecordedPack", "record_pack"]


class RecordedPack(NamedTuple):
    seq: int  # the EVIDENCE_PACK event
    store_id: str  # the audit database it is recorded in


def record_pack(auditing: Auditing, *, reviewer: str, data: dict[str, Any]) -> RecordedPack:
    """Append the EVIDENCE_PACK event."""
    store = auditing._writing()
    with translated():
        appended = store.append(
            EventDraft(
                kind=EventKind.EVIDENCE_PACK,
                request_id=f"evidence-{uuid.uuid4().hex}",
                caller=reviewer,
                data=data,
            )
        )
    return RecordedPack(appended.seq, store.store_id)
