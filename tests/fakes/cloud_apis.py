"""Loopback fakes of Claude's cloud endpoints: AWS Bedrock runtime and Google Vertex AI.

Real ``ThreadingHTTPServer`` s on ``127.0.0.1``; the official SDK clients (``AnthropicBedrock``,
``AnthropicVertex``) talk to them over real sockets, and every request received is kept (path,
headers, raw body bytes) so tests can compare it with what the gateway recorded.

    with FakeBedrock(region="eu-central-1") as fake:
        fake.script(CloudReply.throttled(), CloudReply.ok())
        ...  # BedrockProvider(region="eu-central-1", base_url=fake.base_url)
        fake.requests[0].path  # "/model/anthropic.claude-sonnet-4-6/invoke"

Bedrock: ``POST /model/{modelId}/invoke`` answers a Messages message naming ``modelId``;
``/invoke-with-response-stream`` answers the Messages stream events in AWS event-stream framing
(each a ``chunk`` event whose payload is ``{"bytes": base64(event JSON)}``, with prelude and
message CRC32s, as Bedrock sends them). A request is refused (403, ``AccessDeniedException``)
unless its ``Authorization`` is a well-formed SigV4 header for service ``bedrock`` in the
fake's region and every header it says it signed is present. ``CloudReply.throttled()`` is
Bedrock's 429 ``ThrottlingException``.

Vertex: ``POST /v1/projects/{p}/locations/{r}/publishers/anthropic/models/{m}:rawPredict``
and ``:streamRawPredict`` (SSE), and ``models/count-tokens:rawPredict`` (the model named in
the body); a request without ``Authorization: Bearer <the fake's token>`` is refused (401,
Google's error shape). ``CloudReply.throttled()`` is Google's 429 ``RESOURCE_EXHAUSTED``.

Both, as the clouds do: a body whose ``anthropic_version`` is not the transport's
(``bedrock-2023-05-31``, ``vertex-2023-10-16``) or that carries a top-level
``cache_control`` (the first-party API's automatic caching, which neither cloud takes) is a
400 in the transport's error shape. Prompt caching works on cache_control breakpoints in
blocks: the first request with a given cached prefix reports it as
``cache_creation_input_tokens``, every later one as ``cache_read_input_tokens``. Given tools,
the fake calls the first one (``TOOL_INPUT``) unless the last message holds a tool result.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "TOOL_INPUT",
    "VERSIONS",
    "CloudReply",
    "FakeBedrock",
    "FakeVertex",
    "ReceivedRequest",
    "event_stream_frame",
]

TEXT = "The fake cloud model answers."


@dataclass(frozen=True)
class CloudReply:
    """One scripted answer: ``ok`` (the default), ``throttled``, ``hangs`` or
    ``fails_mid_stream``."""

    kind: str = "ok"

    @classmethod
    def ok(cls) -> CloudReply:
        return cls("ok")

    @classmethod
    def throttled(cls) -> CloudReply:
        return cls("throttled")

    @classmethod
    def hangs(cls) -> CloudReply:
        """No answer until the fake closes (a call to kill a process in the middle of)."""
        return cls("hangs")

    @classmethod
    def fails_mid_stream(cls) -> CloudReply:
        """A stream that breaks off after its first text delta: Bedrock's
        ``modelStreamErrorException`` frame, Vertex's ``error`` event (overloaded)."""
        return cls("fails_mid_stream")


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


VERSIONS = {"bedrock": "bedrock-2023-05-31", "vertex": "vertex-2023-10-16"}


def _words(value: Any) -> int:
    return len(json.dumps(value).split())


def _cached_prefix(request: dict[str, Any]) -> Any:
    """The prompt up to and including its last cache_control breakpoint (tools, then system,
    then messages, the order the cache reads them), or None without a breakpoint."""
    parts: list[Any] = [*request.get("tools", [])]
    system = request.get("system")
    parts += system if isinstance(system, list) else []
    for message in request.get("messages", []):
        content = message.get("content")
        parts += content if isinstance(content, list) else []
    marked = [i for i, p in enumerate(parts) if isinstance(p, dict) and "cache_control" in p]
    return parts[: marked[-1] + 1] if marked else None


TOOL_INPUT = {"name": "ACME Shipping Ltd", "entity_type": "organisation"}


def _calls_a_tool(request: dict[str, Any]) -> bool:
    """With tools, the fake calls the first one, unless it has just been given a result."""
    if not request.get("tools"):
        return False
    last = request.get("messages", [{}])[-1].get("content")
    return not (isinstance(last, list) and any(b.get("type") == "tool_result" for b in last))


def _message(model: str, request: dict[str, Any], cache_usage: dict[str, int]) -> dict[str, Any]:
    words = sum(len(str(m.get("content", "")).split()) for m in request.get("messages", []))
    content: list[dict[str, Any]] = [{"type": "text", "text": TEXT}]
    if _calls_a_tool(request):
        name = request["tools"][0]["name"]
        content.append(
            {"type": "tool_use", "id": "toolu_cloud_1", "name": name, "input": TOOL_INPUT}
        )
    return {
        "id": "msg_fake_cloud",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if len(content) > 1 else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": max(words, 1),
            "output_tokens": len(TEXT.split()),
            **cache_usage,
        },
    }


def _stream_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    text = message["content"][0]["text"]
    half = len(text) // 2
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text[:half]},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text[half:]},
        },
        {"type": "content_block_stop", "index": 0},
        *_tool_events(message),
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
        {"type": "message_stop"},
    ]


def _tool_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool_use block as the stream carries it: its input as partial JSON."""
    events: list[dict[str, Any]] = []
    for index, block in enumerate(message["content"][1:], start=1):
        start = {**block, "input": {}}
        partial = json.dumps(block["input"])
        events += [
            {"type": "content_block_start", "index": index, "content_block": start},
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": partial},
            },
            {"type": "content_block_stop", "index": index},
        ]
    return events


def event_stream_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (total and header lengths, CRC32), string
    headers, payload, and the message's CRC32."""
    encoded = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        encoded += struct.pack("!B", len(raw_name)) + raw_name
        encoded += struct.pack("!BH", 7, len(raw_value)) + raw_value  # 7: a string value
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)


def _chunk_frame(event: dict[str, Any]) -> bytes:
    payload = json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode()})
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return event_stream_frame(headers, payload.encode())


_SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/"
    r"(?P<service>[a-z-]+)/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), "
    r"Signature=[0-9a-f]{64}"
)


class _CloudFake:
    """The server and the record, shared by both fakes; ``_route`` is each one's."""

    transport = ""  # each fake's: the key of VERSIONS

    def __init__(self) -> None:
        self.requests: list[ReceivedRequest] = []
        self._script: deque[CloudReply] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._cached: set[str] = set()
        self._closing = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                request = ReceivedRequest(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with fake._lock:
                    fake.requests.append(request)
                    fake._arrived.notify_all()
                    reply = fake._script.popleft() if fake._script else CloudReply.ok()
                if reply.kind == "hangs":
                    fake._closing.wait()
                    return
                status, headers, content = fake._route(request, reply)
                self.send_response(status)
                for name, value in {**headers, "content-length": str(len(content))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(content)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _route(
        self, request: ReceivedRequest, reply: CloudReply
    ) -> tuple[int, dict[str, str], bytes]:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def body_problem(self, body: dict[str, Any]) -> str | None:
        """Why the cloud would refuse ``body`` with a 400, or None."""
        version = body.get("anthropic_version")
        if version != VERSIONS[self.transport]:
            return f"anthropic_version {version!r} is not {VERSIONS[self.transport]!r}"
        if "cache_control" in body:
            return "cache_control: Extra inputs are not permitted"
        return None

    def cache_usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Prompt caching's usage fields: a prefix seen before is read, a new one written."""
        prefix = _cached_prefix(body)
        if prefix is None:
            return {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        key = json.dumps(prefix, sort_keys=True)
        with self._lock:
            seen = key in self._cached
            self._cached.add(key)
        tokens = _words(prefix)
        if seen:
            return {"cache_creation_input_tokens": 0, "cache_read_input_tokens": tokens}
        return {"cache_creation_input_tokens": tokens, "cache_read_input_tokens": 0}

    def wait_for_requests(self, count: int, timeout: float = 60.0) -> bool:
        """Whether ``count`` requests have arrived within ``timeout`` seconds."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.requests) >= count, timeout)

    def script(self, *replies: CloudReply) -> None:
        with self._lock:
            self._script.extend(replies)

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()


def _json(
    status: int, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    return (
        status,
        {"content-type": "application/json", **(headers or {})},
        json.dumps(body).encode(),
    )


class FakeBedrock(_CloudFake):
    """Bedrock runtime's InvokeModel and InvokeModelWithResponseStream (see the module)."""

    transport = "bedrock"

    _PATH = re.compile(r"/model/(?P<model>[^/]+)/(?P<op>invoke|invoke-with-response-stream)")

    def __init__(self, *, region: str = "us-east-1") -> None:
        super().__init__()
        self.region = region

    def _signature_problem(self, request: ReceivedRequest) -> str | None:
        match = _SIGV4.fullmatch(request.headers.get("authorization", ""))
        if match is None:
            return "no well-formed SigV4 Authorization header"
        if match["service"] != "bedrock" or match["region"] != self.region:
            return f"signed for {match['service']} in {match['region']}"
        missing = [h for h in match["signed"].split(";") if h not in request.headers]
        if missing:
            return f"signed headers missing from the request: {missing}"
        return None

    def _route(
        self, request: ReceivedRequest, reply: CloudReply
    ) -> tuple[int, dict[str, str], bytes]:
        rid = {"x-amzn-requestid": f"bedrock-req-{len(self.requests)}"}
        problem = self._signature_problem(request)
        if problem is not None:
            return _json(
                403, {"message": problem}, {**rid, "x-amzn-errortype": "AccessDeniedException"}
            )
        match = self._PATH.fullmatch(request.path)
        if match is None:
            return _json(404, {"message": "unknown operation"}, rid)
        if reply.kind == "throttled":
            headers = {**rid, "x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/"}
            return _json(429, {"message": "Too many requests, please wait."}, headers)
        body = json.loads(request.body)
        refused = self.body_problem(body)
        if refused is not None:
            headers = {**rid, "x-amzn-errortype": "ValidationException"}
            return _json(400, {"message": f"Malformed input request: {refused}"}, headers)
        model = match["model"]
        message = _message(model, body, self.cache_usage(body))
        if match["op"] == "invoke":
            return _json(200, message, rid)
        stream = _stream_events(message)
        frames = b"".join(_chunk_frame(event) for event in stream)
        if reply.kind == "fails_mid_stream":
            frames = b"".join(_chunk_frame(event) for event in stream[:3])
            error = json.dumps({"message": "The model stopped unexpectedly."}).encode()
            frames += event_stream_frame(
                {
                    ":exception-type": "modelStreamErrorException",
                    ":content-type": "application/json",
                    ":message-type": "exception",
                },
                error,
            )
        return 200, {**rid, "content-type": "application/vnd.amazon.eventstream"}, frames


class FakeVertex(_CloudFake):
    """Vertex AI's rawPredict and streamRawPredict for Anthropic models (see the module)."""

    _PATH = re.compile(
        r"/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/anthropic/"
        r"models/(?P<model>[^/:]+):(?P<op>rawPredict|streamRawPredict)"
    )

    transport = "vertex"
    _COUNT = re.compile(
        r"/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/count-tokens:rawPredict"
    )

    def __init__(self, *, token: str = "fake-google-token") -> None:  # noqa: S107 - a test token
        super().__init__()
        self.token = token

    def _route(
        self, request: ReceivedRequest, reply: CloudReply
    ) -> tuple[int, dict[str, str], bytes]:
        rid = {"x-request-id": f"vertex-req-{len(self.requests)}"}
        if request.headers.get("authorization") != f"Bearer {self.token}":
            error = {"code": 401, "message": "invalid credentials", "status": "UNAUTHENTICATED"}
            return _json(401, {"error": error}, rid)
        counting = self._COUNT.fullmatch(request.path) is not None
        match = self._PATH.fullmatch(request.path)
        if match is None and not counting:
            return _json(404, {"error": {"code": 404, "message": "no", "status": "NOT_FOUND"}}, rid)
        if reply.kind == "throttled":
            error = {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}
            return _json(429, {"error": error}, rid)
        body = json.loads(request.body)
        refused = self.body_problem(body)
        if refused is not None:
            error = {"code": 400, "message": refused, "status": "INVALID_ARGUMENT"}
            return _json(400, {"error": error}, rid)
        if counting:
            return _json(200, {"input_tokens": _words(body.get("messages"))}, rid)
        assert match is not None
        message = _message(match["model"], body, self.cache_usage(body))
        if match["op"] == "rawPredict":
            return _json(200, message, rid)
        events = _stream_events(message)
        if reply.kind == "fails_mid_stream":
            overloaded = {"type": "overloaded_error", "message": "Overloaded"}
            events = [*events[:3], {"type": "error", "error": overloaded}]
        sse = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        return 200, {**rid, "content-type": "text/event-stream"}, sse
