"""The structured access log: one ``http_request`` event per request, after its answer.

    {"event": "http_request", "method": "POST", "path": "/v1/messages", "status": 200,
     "latency_ms": 3.1, "request_id": "req_...", "task": "compliance_review",
     "caller": "payments-svc", "key_id": "key_...", "seq": 12}

Ids, task, caller, status and latency only: never a prompt, an answer or a key; each text
field at most 200 characters, escaped (a task is what the caller named, of any length). What a route
learns (its caller, task, request id, seq) it leaves in the request's state, which the log
reads when the exchange is over - for a stream, when its last event went out.
"""

from __future__ import annotations

import os
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway._inputs import safe_label
from gateway._log import log

__all__ = ["AccessLog"]

_FIELDS = ("request_id", "unrecorded", "task", "caller", "key_id", "seq", "stream_close_error")


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.pid = os.getpid()  # which worker answered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        ended = False

        async def sending(message: Message) -> None:
            nonlocal status, ended
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            state: dict[str, Any] = scope.get("state") or {}
            fields = {
                name: _bounded(state[name]) for name in _FIELDS if state.get(name) is not None
            }
            log.info(
                "http_request",
                pid=self.pid,
                method=scope["method"],
                path=scope["path"],
                status=status,
                complete=ended,
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
                **fields,
            )


def _bounded(value: Any) -> Any:
    return safe_label(value) if isinstance(value, str) else value
