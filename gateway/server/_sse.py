"""Server-sent events in the Messages API's framing: one ``event:`` line per event, its JSON
``data:`` line, a blank line; each event is its own chunk, so it is flushed as it comes.

    frame({"type": "message_start", "message": {...}})
    # b'event: message_start\\ndata: {"type":"message_start",...}\\n\\n'

A failure after the stream began cannot change the status any more; it is an ``error`` event
(what the API itself sends when it overloads mid-answer), and the SDKs raise it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gateway.server._errors import ErrorAnswer, error_body

__all__ = ["SSE_HEADERS", "error_frame", "frame"]

# No caching and no buffering by a proxy in between (nginx honours x-accel-buffering).
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def frame(event: Mapping[str, Any]) -> bytes:
    kind = event.get("type")
    name = kind if isinstance(kind, str) and kind.isidentifier() else "message"
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"event: {name}\ndata: {data}\n\n".encode()


def error_frame(answer: ErrorAnswer) -> bytes:
    return frame(error_body(answer))
