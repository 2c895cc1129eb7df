"""A loopback fake of the Claude Messages API, for tests and benchmarks.

A real ``ThreadingHTTPServer`` on ``127.0.0.1`` answers ``POST /v1/messages`` with scripted
replies and faults, and records every request it received (headers and raw body bytes), so
tests can assert what went on the wire. The real SDK talks to it over real sockets.

    with FakeMessagesAPI() as fake:
        fake.script(Reply.error(429, retry_after=1.5), Reply.ok(text="hello"))
        ...  # point a client at fake.base_url
        assert fake.requests[0].json["model"] == "claude-sonnet-4-6"

Scripted replies are consumed in order, one per request; when the queue is empty the default
reply answers (an ok message echoing the requested model, or ``fake.set_default(fn)``).
Streaming requests (``"stream": true``) get server-sent events; ``Reply.stream_error()`` puts
an ``error`` event inside a 200 stream, as the real API does when it overloads mid-answer.
``Reply.stream(...)`` writes a stream event by event over chunked transfer encoding, as the
API does: ``deltas`` text deltas ``delay`` seconds apart, and optionally an ``error`` event
(``error_after``) or a dropped connection (``drop_after``) after that many deltas, a refusal
or ``max_tokens`` stop reason with ``stop_details``; ``fake.stream_closed(n)`` tells whether
the client closed the n-th request's connection before the stream ended.

What an answer says about itself: ``Reply.ok(model=...)`` answers as another model than the one
asked for; ``inference_geo`` and ``service_tier`` go into its ``usage``; ``stop_details``,
``thinking`` blocks (``(text, signature)``; empty text is an omitted display) and
``context_management`` into the message. ``POST /v1/messages/count_tokens`` answers
``{"input_tokens": n}`` (words in the messages and system prompt, as usage counts them), or a
scripted error.

``GET /v1/models`` serves the list given to ``fake.set_models([model_entry("claude-x"), ...])``
in the real API's paging shape (``data``, ``has_more``, ``first_id``, ``last_id``; ``limit``,
``after_id``, ``before_id`` and ``lifecycle`` honoured; retired models only when asked for), and
``GET /v1/models/<id>`` one entry. A scripted reply other than ``Reply.ok()`` is consumed by a
GET as by a POST, so ``fake.script(Reply.error(500))`` fails the next list call.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

__all__ = ["ERROR_TYPES", "FakeMessagesAPI", "RecordedRequest", "Reply", "model_entry"]

# The API's error type for each status (reference/claude-api.md, "Errors").
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

DEFAULT_TEXT = "This is the fake Messages API answering."
DEFAULT_MODEL = "claude-fake-1"
# How long a paced stream's next delta waits for the test's release: long enough for any load.
PACE_WAIT_S = 10.0

# Sent on every reply so tests can check that the provider reports rate limits.
RATE_LIMIT_HEADERS: tuple[tuple[str, str], ...] = (
    ("anthropic-ratelimit-requests-limit", "4000"),
    ("anthropic-ratelimit-requests-remaining", "3999"),
    ("anthropic-ratelimit-tokens-limit", "400000"),
    ("anthropic-ratelimit-tokens-remaining", "399000"),
)

ReplyKind = Literal[
    "ok", "error", "slow", "drop", "malformed", "stream_error", "truncated", "stream"
]


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with the class methods, not the constructor."""

    kind: ReplyKind
    status: int = 200
    text: str = DEFAULT_TEXT
    model: str | None = None
    stop_reason: str = "end_turn"
    # The stop sequence the answer ended at (with stop_reason "stop_sequence").
    stop_sequence: str | None = None
    error_type: str | None = None
    message: str | None = None
    retry_after: float | str | None = None
    retry_after_ms: float | None = None
    seconds: float = 0.0
    then: Reply | None = None
    headers: tuple[tuple[str, str], ...] = ()
    deltas: int = 2
    delay: float = 0.0
    first_delay: float = 0.0
    # Seconds between message_stop and the end of the body (the final chunk), streams only.
    tail_delay: float = 0.0
    error_after: int | None = None
    drop_after: int | None = None
    # Released by the test as each delta reaches it; the next delta waits for it (streams).
    paced_by: threading.Semaphore | None = field(default=None, compare=False)
    stop_details: dict[str, Any] | None = None
    # Tool calls after the text block, as (id, name, input); non-streamed answers only.
    tool_uses: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    # Reported in usage when set (where inference ran, the capacity tier that served it).
    inference_geo: str | None = None
    service_tier: str | None = None
    # Thinking blocks before the text, as (thinking text, signature); non-streamed only.
    thinking: tuple[tuple[str, str], ...] = ()
    context_management: dict[str, Any] | None = None

    @classmethod
    def ok(
        cls,
        text: str = DEFAULT_TEXT,
        model: str | None = None,
        stop_reason: str = "end_turn",
        json_text: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        *,
        inference_geo: str | None = None,
        service_tier: str | None = None,
        stop_details: dict[str, Any] | None = None,
        thinking: tuple[tuple[str, str], ...] = (),
        context_management: dict[str, Any] | None = None,
        stop_sequence: str | None = None,
    ) -> Reply:
        """A successful message; ``json_text`` (if given) is the text, for JSON tasks.
        ``model`` answers as that model whatever was asked for. ``stop_sequence``: the answer
        stopped at it (``stop_reason`` becomes ``"stop_sequence"``)."""
        body_text = json_text if json_text is not None else text
        return cls(
            "ok",
            text=body_text,
            model=model,
            stop_reason="stop_sequence" if stop_sequence is not None else stop_reason,
            stop_sequence=stop_sequence,
            headers=headers,
            inference_geo=inference_geo,
            service_tier=service_tier,
            stop_details=stop_details,
            thinking=thinking,
            context_management=context_management,
        )

    @classmethod
    def tool_use(
        cls, *calls: tuple[str, str, dict[str, Any]], text: str = "Let me look that up."
    ) -> Reply:
        """An answer that calls tools: a text block, then one ``tool_use`` block per
        ``(id, name, input)``, with ``stop_reason: "tool_use"`` (streamed when asked: each
        call's input as one ``input_json_delta``)."""
        return cls("ok", text=text, stop_reason="tool_use", tool_uses=calls)

    @classmethod
    def error(
        cls,
        status: int,
        *,
        retry_after: float | str | None = None,
        retry_after_ms: float | None = None,
        error_type: str | None = None,
        message: str | None = None,
    ) -> Reply:
        """An error body ``{"type": "error", "error": {...}}`` with the given HTTP status."""
        return cls(
            "error",
            status=status,
            error_type=error_type or ERROR_TYPES.get(status, "api_error"),
            message=message or f"fake error {status}",
            retry_after=retry_after,
            retry_after_ms=retry_after_ms,
        )

    @classmethod
    def redirect(cls, status: int, location: str) -> Reply:
        """A ``status`` (3xx) answer pointing at ``location``."""
        return cls(
            "error",
            status=status,
            error_type="api_error",
            message="moved",
            headers=(("location", location),),
        )

    @classmethod
    def slow(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Wait ``seconds`` before answering (with ``then``, or the default reply)."""
        return cls("slow", seconds=seconds, then=then)

    @classmethod
    def drop(cls) -> Reply:
        """Read the request, then close the connection without any response."""
        return cls("drop")

    @classmethod
    def malformed(cls) -> Reply:
        """HTTP 200 with ``application/json`` and a body that is not JSON."""
        return cls("malformed")

    @classmethod
    def truncated(cls, text: str = DEFAULT_TEXT, status: int = 200) -> Reply:
        """A reply (HTTP 200 by default) whose ``content-length`` promises more than is sent,
        then the connection closes: the body breaks off mid-read (a proxy or network cut)."""
        return cls("truncated", status=status, text=text)

    @classmethod
    def stream(
        cls,
        text: str = DEFAULT_TEXT,
        *,
        deltas: int = 4,
        delay: float = 0.0,
        first_delay: float = 0.0,
        stop_reason: str = "end_turn",
        stop_details: dict[str, Any] | None = None,
        error_after: int | None = None,
        error_type: str = "overloaded_error",
        drop_after: int | None = None,
        model: str | None = None,
        stop_sequence: str | None = None,
        paced_by: threading.Semaphore | None = None,
        tail_delay: float = 0.0,
    ) -> Reply:
        """A 200 event stream written event by event (chunked): ``text`` in ``deltas`` text
        deltas, ``delay`` seconds apart (``first_delay`` before the first). ``error_after=n``
        sends an ``error`` event after n deltas; ``drop_after=n`` cuts the connection after n
        deltas. ``paced_by``: each delta after the first is sent only once the test has
        released the semaphore (as the previous delta reached it); one sent after waiting
        ``PACE_WAIT_S`` in vain is counted in ``FakeMessagesAPI.unpaced``. ``tail_delay``:
        seconds between ``message_stop`` and the end of the body. A non-streaming request gets
        the message as JSON."""
        return cls(
            "stream",
            text=text,
            model=model,
            stop_reason="stop_sequence" if stop_sequence is not None else stop_reason,
            stop_sequence=stop_sequence,
            stop_details=stop_details,
            deltas=deltas,
            delay=delay,
            first_delay=first_delay,
            error_after=error_after,
            error_type=error_type,
            message="Overloaded" if error_type == "overloaded_error" else f"fake {error_type}",
            drop_after=drop_after,
            paced_by=paced_by,
            tail_delay=tail_delay,
        )

    @classmethod
    def stream_error(
        cls, error_type: str = "overloaded_error", message: str = "Overloaded"
    ) -> Reply:
        """HTTP 200 event stream that starts a message, then carries an ``error`` event.

        A non-streaming request cannot receive an in-stream error; it gets the equivalent
        status answer instead (529 for ``overloaded_error``).
        """
        return cls("stream_error", error_type=error_type, message=message)


@dataclass(frozen=True)
class RecordedRequest:
    """What the fake received: the method, path, lower-cased headers and raw body bytes."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: dict[str, Any] | None


@dataclass
class _State:
    queue: deque[Reply] = field(default_factory=deque)
    default: Callable[[RecordedRequest], Reply] = field(default=lambda _request: Reply.ok())
    requests: list[RecordedRequest] = field(default_factory=list)
    models: list[dict[str, Any]] = field(default_factory=list)
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)
    closing: threading.Event = field(default_factory=threading.Event)
    # request number -> whether the client went away before the stream's last byte
    stream_ends: dict[int, bool] = field(default_factory=dict)
    unpaced: int = 0  # paced deltas sent without the test's release (see Reply.stream)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A slow reply must not hold up close(): handler threads are not joined.
    block_on_close = False
    state: _State

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out closes its socket; writing to it then fails. That is the
        # scenario under test, not a fault of the fake, so it is not printed.
        return


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every reply, which would swamp any benchmark.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        state = self.server.state
        recorded = RecordedRequest(
            method="GET",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=b"",
            json=None,
        )
        with state.lock:
            state.requests.append(recorded)
            number = next(state.counter)
            reply = state.queue.popleft() if state.queue else None
            models = list(state.models)
        route = urllib.parse.urlsplit(self.path)
        if route.path != "/v1/models" and not route.path.startswith("/v1/models/"):
            reply = Reply.error(404, message=f"no route {route.path}")
        self._answer_models(reply, route, models, recorded, number)

    def _answer_models(
        self,
        reply: Reply | None,
        route: urllib.parse.SplitResult,
        models: list[dict[str, Any]],
        request: RecordedRequest,
        number: int,
    ) -> None:
        headers = {"request-id": f"req_fake_{number}", **dict(RATE_LIMIT_HEADERS)}
        if reply is not None and reply.kind == "slow":
            if self.server.state.closing.wait(reply.seconds):
                return
            reply = reply.then
        if reply is not None and reply.kind != "ok":
            self._answer(reply, request, number)
            return
        if route.path == "/v1/models":
            status, body = _models_page(models, urllib.parse.parse_qs(route.query))
        else:
            wanted = urllib.parse.unquote(route.path.removeprefix("/v1/models/"))
            found = [m for m in models if m.get("id") == wanted]
            status, body = (
                (200, found[0])
                if found
                else (404, _error_body("not_found_error", f"model: {wanted}"))
            )
        self._reply_json(status, body, headers)

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        recorded = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=raw,
            json=parsed if isinstance(parsed, dict) else None,
        )
        with state.lock:
            state.requests.append(recorded)
            number = next(state.counter)
            reply = state.queue.popleft() if state.queue else None
        if reply is None:
            reply = state.default(recorded)
        route = self.path.split("?")[0]
        if route == "/v1/messages/count_tokens" and reply.kind in ("ok", "stream"):
            body = recorded.json or {}
            count = _count_words(body.get("messages")) + _count_words(body.get("system"))
            headers = {"request-id": f"req_fake_{number}"}
            self._reply_json(200, {"input_tokens": count}, headers)
            return
        if route not in ("/v1/messages", "/v1/messages/count_tokens"):
            reply = Reply.error(404, message=f"no route {self.path}")
        self._answer(reply, recorded, number)

    def _answer(self, reply: Reply, request: RecordedRequest, number: int) -> None:
        state = self.server.state
        base_headers = {"request-id": f"req_fake_{number}", **dict(RATE_LIMIT_HEADERS)}
        streaming = bool(request.json and request.json.get("stream") is True)
        if reply.kind == "slow":
            if state.closing.wait(reply.seconds):
                return
            self._answer(reply.then or state.default(request), request, number)
        elif reply.kind == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif reply.kind == "malformed":
            self._reply_bytes(
                200, b'{"id": "msg_fake", "content": [', "application/json", base_headers
            )
        elif reply.kind == "truncated":
            self._reply_truncated(reply.status, _message(reply, request, number), base_headers)
        elif reply.kind == "error" or (reply.kind == "stream_error" and not streaming):
            status = reply.status if reply.kind == "error" else 529
            headers = {**base_headers, **dict(reply.headers)}
            if reply.retry_after is not None:
                headers["retry-after"] = str(reply.retry_after)
            if reply.retry_after_ms is not None:
                headers["retry-after-ms"] = str(reply.retry_after_ms)
            body = _error_body(reply.error_type or "api_error", reply.message or "fake error")
            body["request_id"] = headers["request-id"]
            self._reply_json(status, body, headers)
        elif reply.kind == "stream" and streaming:
            message = _message(reply, request, number)
            if reply.stop_details is not None:
                message["stop_details"] = reply.stop_details
            self._reply_stream(reply, message, {**base_headers, **dict(reply.headers)}, number)
        else:
            message = _message(reply, request, number)
            headers = {**base_headers, **dict(reply.headers)}
            if streaming:
                events = _stream_events(
                    message, failure=reply if reply.kind == "stream_error" else None
                )
                self._reply_bytes(200, events, "text/event-stream", headers)
            else:
                self._reply_json(200, message, headers)

    def _reply_stream(
        self, reply: Reply, message: dict[str, Any], headers: dict[str, str], number: int
    ) -> None:
        """Write the stream event by event, each event one HTTP chunk, flushed."""
        state = self.server.state
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        closed_early = True
        try:
            for kind, payload in _stream_script(message, reply):
                if kind == "wait":
                    if state.closing.wait(payload):
                        return
                    continue
                if kind == "pace":
                    if not payload.acquire(timeout=PACE_WAIT_S):
                        with state.lock:
                            state.unpaced += 1
                    continue
                if kind == "drop":
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    closed_early = False
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            closed_early = False
        except OSError:  # the client closed its end: what a test of closing early wants
            self.close_connection = True
        finally:
            with state.lock:
                state.stream_ends[number] = closed_early

    def _reply_truncated(
        self, status: int, message: dict[str, Any], headers: dict[str, str]
    ) -> None:
        payload = json.dumps(message).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload[: len(payload) // 2])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _reply_json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        self._reply_bytes(status, json.dumps(body).encode(), "application/json", headers)

    def _reply_bytes(
        self, status: int, payload: bytes, content_type: str, headers: dict[str, str]
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()


_LIFECYCLES = ("active", "deprecated", "retired")
_THINKING_TYPES = ("adaptive", "between_tools", "disabled", "enabled")
_EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")


def model_entry(
    model_id: str,
    *,
    lifecycle: str = "active",
    retires_at: str | None = None,
    max_tokens: int | None = 128000,
    max_input_tokens: int | None = 1000000,
    thinking_types: tuple[str, ...] = ("adaptive", "disabled"),
    effort_levels: tuple[str, ...] = _EFFORT_LEVELS,
    structured_outputs: bool = True,
    created_at: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    """One ``models.list`` entry in the API's shape (every capability key present, as the API
    promises). ``retires_at`` is an ISO date ("2027-01-22") or an RFC 3339 datetime."""

    def support(flag: bool) -> dict[str, bool]:
        return {"supported": flag}

    if retires_at is not None and "T" not in retires_at:
        retires_at = f"{retires_at}T00:00:00Z"
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id.replace("-", " ").title(),
        "created_at": created_at,
        "lifecycle": lifecycle,
        "deprecated_at": None if lifecycle == "active" else created_at,
        "retires_at": retires_at,
        "max_tokens": max_tokens,
        "max_input_tokens": max_input_tokens,
        "line": None,
        "capabilities": {
            "batch": support(True),
            "citations": support(True),
            "code_execution": support(True),
            "context_management": {"supported": False},
            "effort": {
                "supported": bool(effort_levels),
                **{level: support(level in effort_levels) for level in _EFFORT_LEVELS},
            },
            "image_input": support(True),
            "pdf_input": support(True),
            "server_tools": {
                "supported": False,
                "code_execution": support(False),
                "web_search": support(False),
            },
            "structured_outputs": support(structured_outputs),
            "thinking": {
                "supported": bool(set(thinking_types) - {"disabled"}),
                "types": {kind: support(kind in thinking_types) for kind in _THINKING_TYPES},
            },
        },
    }


def _models_page(
    models: list[dict[str, Any]], query: dict[str, list[str]]
) -> tuple[int, dict[str, Any]]:
    """One page of ``GET /v1/models``, cut the way the real API cuts it."""
    asked = [
        value
        for key in ("lifecycle", "lifecycle[]")
        for raw in query.get(key, [])
        for value in raw.split(",")
    ]
    if any(value not in _LIFECYCLES for value in asked):
        return 400, _error_body("invalid_request_error", "lifecycle: unknown stage")
    stages = set(asked) or {"active", "deprecated"}
    listed = [m for m in models if m.get("lifecycle") in stages]
    try:
        limit = int(query.get("limit", ["20"])[0])
    except ValueError:
        limit = 0
    if not 1 <= limit <= 1000:
        return 400, _error_body("invalid_request_error", "limit: must be from 1 to 1000")
    ids = [m.get("id") for m in listed]
    after, before = query.get("after_id", [None])[0], query.get("before_id", [None])[0]
    if after is not None and after in ids:
        rest = listed[ids.index(after) + 1 :]
        data, has_more = rest[:limit], len(rest) > limit
    elif before is not None and before in ids:
        rest = listed[: ids.index(before)]
        data, has_more = rest[-limit:], len(rest) > limit
    else:
        data, has_more = listed[:limit], len(listed) > limit
    return 200, {
        "data": data,
        "has_more": has_more,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _count_words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_count_words(v) for v in value)
    if isinstance(value, dict):
        return sum(_count_words(v) for v in value.values())
    return 0


def _message(reply: Reply, request: RecordedRequest, number: int) -> dict[str, Any]:
    body = request.json or {}
    model = reply.model or body.get("model") or DEFAULT_MODEL
    message = {
        "id": f"msg_fake_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            *(
                {"type": "thinking", "thinking": thought, "signature": signature}
                for thought, signature in reply.thinking
            ),
            {"type": "text", "text": reply.text},
            *(
                {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
                for tool_id, name, tool_input in reply.tool_uses
            ),
        ],
        "stop_reason": reply.stop_reason,
        "stop_sequence": reply.stop_sequence,
        "usage": {
            "input_tokens": _count_words(body.get("messages")) + _count_words(body.get("system")),
            "output_tokens": len(reply.text.split()),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    usage = message["usage"]
    if reply.inference_geo is not None:
        usage["inference_geo"] = reply.inference_geo
    if reply.service_tier is not None:
        usage["service_tier"] = reply.service_tier
    if reply.kind == "ok" and reply.stop_details is not None:
        message["stop_details"] = reply.stop_details
    if reply.context_management is not None:
        message["context_management"] = reply.context_management
    return message


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _stream_events(message: dict[str, Any], failure: Reply | None) -> bytes:
    """The event stream the API sends for ``message``; with ``failure``, an error mid-way."""
    text: str = message["content"][0]["text"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    out = [
        _sse("message_start", {"type": "message_start", "message": start}),
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _sse("ping", {"type": "ping"}),
    ]
    if failure is not None:
        error = _error_body(
            failure.error_type or "overloaded_error", failure.message or "Overloaded"
        )
        out.append(_sse("error", error))
        return b"".join(out)
    # Two deltas so that a client has to accumulate, not just copy one event.
    half = len(text) // 2
    for piece in (text[:half], text[half:]):
        delta = {"type": "text_delta", "text": piece}
        out.append(
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        )
    out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    for index, block in enumerate(message["content"][1:], start=1):
        if block.get("type") != "tool_use":
            continue
        start_block = {**block, "input": {}}
        partial = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start_block},
            )
        )
        out.append(
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": partial},
            )
        )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": message["stop_reason"],
                    "stop_sequence": message["stop_sequence"],
                },
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def _stream_script(message: dict[str, Any], reply: Reply) -> Iterator[tuple[str, Any]]:
    """What ``_reply_stream`` does, step by step: ("send", bytes), ("wait", seconds),
    ("pace", semaphore), ("drop")."""
    text: str = message["content"][0]["text"]
    words = text.split(" ")
    count = max(1, min(reply.deltas, len(words)))
    size = -(-len(words) // count)
    pieces = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
    pieces = [p + (" " if i < len(pieces) - 1 else "") for i, p in enumerate(pieces)]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    start.pop("stop_details", None)
    yield "send", _sse("message_start", {"type": "message_start", "message": start})
    yield (
        "send",
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    )
    yield "send", _sse("ping", {"type": "ping"})
    for i, piece in enumerate(pieces):
        if reply.error_after is not None and i == reply.error_after:
            error = _error_body(reply.error_type or "overloaded_error", reply.message or "x")
            yield "send", _sse("error", error)
            return
        if reply.drop_after is not None and i == reply.drop_after:
            yield "drop", None
            return
        wait = reply.first_delay if i == 0 else reply.delay
        if wait:
            yield "wait", wait
        if i > 0 and reply.paced_by is not None:
            yield "pace", reply.paced_by
        delta = {"type": "text_delta", "text": piece}
        yield (
            "send",
            _sse(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
            ),
        )
    if reply.error_after is not None and reply.error_after >= len(pieces):
        yield "send", _sse("error", _error_body(reply.error_type or "overloaded_error", "x"))
        return
    if reply.drop_after is not None and reply.drop_after >= len(pieces):
        yield "drop", None
        return
    yield "send", _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    delta_body: dict[str, Any] = {
        "stop_reason": message["stop_reason"],
        "stop_sequence": message["stop_sequence"],
    }
    if message.get("stop_details") is not None:
        delta_body["stop_details"] = message["stop_details"]
    yield (
        "send",
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": delta_body,
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        ),
    )
    yield "send", _sse("message_stop", {"type": "message_stop"})
    if reply.tail_delay:
        yield "wait", reply.tail_delay


class FakeMessagesAPI:
    """The loopback server. Use it as a context manager; ``base_url`` is valid inside."""

    def __init__(self) -> None:
        self._state = _State()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self._state
        self._thread = threading.Thread(
            # A short poll interval so that close() returns quickly (shutdown waits one poll).
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-messages-api",
            daemon=True,
        )
        self._started = False

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request consumes the next one."""
        with self._state.lock:
            self._state.queue.extend(replies)

    def set_models(self, models: list[dict[str, Any]]) -> None:
        """What ``GET /v1/models`` lists, newest first (build entries with :func:`model_entry`)."""
        with self._state.lock:
            self._state.models = [dict(m) for m in models]

    def set_default(self, reply_for: Callable[[RecordedRequest], Reply]) -> None:
        """Answer with ``reply_for(request)`` once the script is used up."""
        with self._state.lock:
            self._state.default = reply_for

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._state.lock:
            return list(self._state.requests)

    def stream_closed(self, number: int, *, wait_s: float = 2.0) -> bool | None:
        """Whether the client closed the ``number``-th request's stream (1-based, in arrival
        order) before its end; ``None`` if that stream has not finished within ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while True:
            with self._state.lock:
                if number in self._state.stream_ends:
                    return self._state.stream_ends[number]
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)

    @property
    def unpaced(self) -> int:
        """Paced stream deltas sent without waiting for the test's release (see Reply.stream)."""
        with self._state.lock:
            return self._state.unpaced

    @property
    def pending(self) -> int:
        """How many scripted replies have not been used yet."""
        with self._state.lock:
            return len(self._state.queue)

    def unscript(self) -> int:
        """Drop the scripted replies not used yet (a test that failed before its requests
        must not leave them to the next test on a shared fake); how many there were."""
        with self._state.lock:
            left = len(self._state.queue)
            self._state.queue.clear()
            return left

    def start(self) -> FakeMessagesAPI:
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def close(self) -> None:
        self._state.closing.set()
        if self._started:
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
