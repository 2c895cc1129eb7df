"""The ACCESS record of a replay that shows a recorded answer.

    draft = answer_read(run_id, recorded, reader="j.smith")   # None: nothing recorded shown

`replay --live` (and `--model ID --live`) prints each recorded answer beside the new one and
puts it in the report: a content read, like `audit show --content`. So it is recorded the
same way, as an ACCESS event naming who read which request's answer (the RESPONSE's seq and
payload digests), committed with the replay's outcome event before the row is reported.
"""

from __future__ import annotations

import uuid

from audit import EventDraft, EventKind
from gateway.replay._recorded import Recorded

READ = ("answer",)  # what a replay shows of the recorded request


def answer_read(run_id: str, recorded: Recorded, *, reader: str | None) -> EventDraft | None:
    """The ACCESS event for showing ``recorded``'s answer in replay run ``run_id``."""
    response = recorded.response
    if response is None:
        return None
    data: dict[str, object] = {
        "reviewer": reader,
        "read_request_id": recorded.request_id,
        "read": list(READ),
        "seqs": [response.seq],
        "shown": True,
        "payloads": dict(response.payload_digests),
        "replay_run": run_id,
    }
    return EventDraft(
        kind=EventKind.ACCESS,
        request_id=f"access-{uuid.uuid4().hex}",
        task=response.task,
        caller=reader,
        data=data,
    )
