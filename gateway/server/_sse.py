"""Server-sent events in the Messages API's framing: one ``event:`` line per event, its JSON
``data:`` line, a blank line; each event is its own chunk, so it is flushed as it comes.

    frame({"type": "message_start", "message": {...}})
    # b'event: message_start\\ndata: {"type":"message_start",...}\\n\\n'

A failure after the stream began cannot change the status any more; it is an ``error`` event
(what the API itself sends when it overloads mid-answer), and the SDKs raise it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.server._errors import ErrorAnswer, error_body

__all__ = ["SSE_HEADERS", "EventStreamResponse", "error_frame", "frame"]

# No caching and no buffering by a proxy in between (nginx honours x-accel-buffering).
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def frame(event: Mapping[str, Any]) -> bytes:
    kind = event.get("type")
    name = kind if isinstance(kind, str) and kind.isidentifier() else "message"
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"event: {name}\ndata: {data}\n\n".encode()


def error_frame(answer: ErrorAnswer) -> bytes:
    return frame(error_body(answer))


class EventStreamResponse(StreamingResponse):
    """A stream that stops as soon as the client goes: the body is pumped in its own task
    while the request's ``receive`` is watched for ``http.disconnect`` (the server would
    otherwise swallow writes to a closed socket and the stream would run on to its end).

    The pump is cancelled once, as plain asyncio does - not by a cancel scope that cancels
    again at every await - so the gateway's stream behind it can record its CANCELLED
    outcome on the way out. ``closing`` runs last, whichever way the response ended: a
    pump cancelled before the body's first step never enters the body generator, so its
    own ``finally`` cannot be what closes the gateway's stream.
    """

    def __init__(
        self,
        content: AsyncIterable[bytes],
        *,
        closing: Callable[[], Awaitable[None]],
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
    ) -> None:
        super().__init__(content, headers=headers, media_type=media_type)
        self.closing = closing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._pump_and_watch(receive, send)
        finally:
            await self.closing()

    async def _pump_and_watch(self, receive: Receive, send: Send) -> None:
        pump = asyncio.ensure_future(self.stream_response(send))
        watch = asyncio.ensure_future(self.listen_for_disconnect(receive))
        try:
            await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not pump.done():
                pump.cancel()
            await asyncio.wait({pump})
            close = getattr(self.body_iterator, "aclose", None)
            if close is not None:
                await close()  # a pump cancelled between events leaves it at a yield
        if not pump.cancelled() and (error := pump.exception()) is not None:
            raise error
