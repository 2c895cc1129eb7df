"""A request still running at the end of the drain time: answered, counted, and said once.

    middleware = [Middleware(AccessLog), Middleware(DrainCancel)]
    quiet_uvicorn_cancel_line()     # in the serving process: ServerState says it instead

At shutdown uvicorn waits ``server_shutdown_grace_s`` for the requests in flight, then cancels
the tasks still running. The gateway records each such call CANCELLED on its way out, but the
``CancelledError`` would then leave the app, and uvicorn prints it as "Exception in ASGI
application" with a traceback, once per request. Here the cancellation ends at the app's
edge instead: a request whose answer had not started gets a 503 ``overloaded_error`` naming
its CANCELLED record (the SDKs retry a 503, on another instance); a stream already under way
ends with the API's ``error`` event (``overloaded_error``), which the SDKs raise, unless its
``message_stop`` already went out (the client has the whole answer; the cancellation only
caught the recording of its outcome): that stream just ends. Each cut-off request is
counted on the process's :class:`ServerState`, which logs one ``server_requests_cancelled``
line with the count when it closes, in place of uvicorn's "Cancel N running task(s)" line.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway._keys import new_request_id
from gateway.server._errors import ErrorAnswer, error_body
from gateway.server._sse import error_frame

__all__ = ["DrainCancel", "quiet_uvicorn_cancel_line"]

# The frame of a stream's last event (gateway.server._sse.frame): the answer is whole.
_MESSAGE_STOP = b"event: message_stop\n"

_MESSAGE = (
    "the gateway was shutting down and this request was still running at the end of its "
    "drain time; it was cancelled, and recorded so. Send it again."
)


class DrainCancel:
    """Just inside the access log: no shutdown cancellation leaves the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = scope.get("state") or {}
        server = state.get("server")
        task = asyncio.current_task()
        if server is not None and task is not None:
            server.serving.add(task)  # so that the shutdown waits for its answer
        started = False
        ended = False
        event_stream = False
        answered = False  # a stream's message_stop went out: the client has the whole answer

        async def sending(message: Message) -> None:
            nonlocal started, ended, event_stream, answered
            if message["type"] == "http.response.start":
                started = True
                event_stream = any(
                    name.lower() == b"content-type" and value.startswith(b"text/event-stream")
                    for name, value in message.get("headers", ())
                )
            elif message["type"] == "http.response.body":
                if not message.get("more_body"):
                    ended = True
                elif event_stream and message.get("body", b"").startswith(_MESSAGE_STOP):
                    await send(message)
                    answered = True
                    return
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            if task is None or task.cancelling() == 0:
                raise  # not a cancellation of this request's task: not ours to end
            # The request's task ends here, answered: the cancellation is done with (the
            # CANCELLED record is written by the gateway call it stopped).
            task.uncancel()
            if answered and not ended:
                # Cancelled while the answer's outcome was being recorded (or the stream
                # closed): the client has the whole answer, so the stream ends as it would
                # have. An error after it would contradict the record and make SDKs retry.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            if server is not None:
                server.cancelled_at_shutdown += 1
            if not started:
                await _answer_cancelled(send, state)
            elif event_stream and not ended:
                await _end_stream_cancelled(send, state)
            elif not ended:
                raise  # a body cut short that is not a stream: uvicorn drops the connection
        finally:
            if server is not None and task is not None:
                server.serving.discard(task)


async def _answer_cancelled(send: Send, state: dict[str, Any]) -> None:
    request_id = state.get("request_id")
    if request_id is None:  # cancelled before its call was recorded: no record to name
        request_id = new_request_id()
        state["unrecorded"] = True
    state["request_id"] = request_id
    state["error_type"] = "overloaded_error"
    body = json.dumps(
        error_body(ErrorAnswer(503, "overloaded_error", _MESSAGE, request_id))
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"request-id", request_id.encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _end_stream_cancelled(send: Send, state: dict[str, Any]) -> None:
    # The API's own way to end a stream that failed: an ``error`` event (the SDKs raise it as
    # an overloaded error). A stream merely ended would read as finished to a client that
    # does not check for message_stop.
    answer = ErrorAnswer(503, "overloaded_error", _MESSAGE, state.get("request_id"))
    await send({"type": "http.response.body", "body": error_frame(answer), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _NotUvicornsCancelLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Cancel %s running task(s)")


def quiet_uvicorn_cancel_line() -> None:
    """Drop uvicorn's "Cancel N running task(s), timeout graceful shutdown exceeded" line:
    the server says it once, as a structured ``server_requests_cancelled`` event."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _NotUvicornsCancelLine) for f in logger.filters):
        logger.addFilter(_NotUvicornsCancelLine())
