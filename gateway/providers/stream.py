"""Stream decisions that never touch a socket: server-sent event frames, the message they add
up to, and the digest of the bytes as they arrived.

    relay = StreamRelay()
    for chunk in response.iter_bytes():          # any I/O loop, sync or async
        for event in relay.feed(chunk):          # dicts, exactly as the API sent them
            forward(event)
    message = relay.message()                    # the assembled final message
    relay.digest(), relay.byte_count, relay.event_count

The shape is h11's: the I/O loops (``MessagesProvider.stream``/``astream``) hand bytes in
and take events out; every decision about what the bytes mean is made here, once.

``MessageAssembler`` is also what the recorder keeps for a stream that ends early (the partial
text and the last usage seen), and ``message_events`` turns a recorded message back into the
events a stream of it would have carried (a replay hit streamed).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

__all__ = [
    "FrameDecoder",
    "MalformedStream",
    "MessageAssembler",
    "SSEDecoder",
    "StreamErrorEvent",
    "StreamRelay",
    "message_events",
]

# Events the gateway does not forward: keep-alives carry nothing a caller needs.
SKIPPED_EVENTS = frozenset({"ping"})


class MalformedStream(Exception):
    """An event stream that is not a Messages API stream (data that is not a JSON object,
    deltas before ``message_start``)."""


class StreamErrorEvent(Exception):
    """An ``error`` event inside a 200 stream; ``body`` is its data (``{"type": "error",
    "error": {...}}``) or the raw text when it is not JSON. ``preceding``: the events that
    came before it in the same chunk, which the stream delivers before the error (however
    the bytes were cut, the caller sees what the upstream sent, in order)."""

    def __init__(self, body: object, preceding: list[dict[str, Any]] | None = None) -> None:
        self.body = body
        self.preceding = preceding or []
        super().__init__("an error event arrived inside the stream")


class FrameDecoder(Protocol):
    """A transport's stream framing: bytes in any chunking, ``(event, data)`` frames out
    (``data`` the event's JSON text; ``event`` its name where the framing carries one)."""

    def feed(self, chunk: bytes) -> Iterable[tuple[str | None, str]]: ...


class SSEDecoder:
    """Server-sent event frames from bytes fed in any chunking (``\\n``, ``\\r\\n`` or ``\\r``
    line ends). Yields ``(event, data)`` per frame; comment lines and ids are dropped."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[tuple[str | None, str]]:
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
            if buffer.endswith(b"\r"):  # maybe half of a \r\n: decide with the next chunk
                self._buffer = buffer
                buffer = b""
                return
            buffer = buffer.replace(b"\r", b"\n")
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            line = buffer[start:end]
            start = end + 1
            if not line:
                if self._data or self._event is not None:
                    frame = (self._event, "\n".join(self._data))
                    self._event, self._data = None, []
                    yield frame
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                self._data.append(value.decode("utf-8"))
            elif field == b"event":
                self._event = value.decode("utf-8")
        self._buffer = buffer[start:]

    @property
    def pending(self) -> bool:
        """Whether bytes of an unfinished frame are held (a stream cut mid-frame)."""
        return bool(self._buffer.strip() or self._data)


class MessageAssembler:
    """The message a sequence of stream events adds up to, and how far it got.

    ``observe(event)`` takes one event dict; ``message()`` is the message so far (complete
    after ``message_stop``); ``text()`` the text blocks joined; ``usage`` the latest usage
    (``message_delta`` carries cumulative usage, merged over ``message_start``'s).
    """

    __slots__ = ("_blocks", "_json_parts", "_message", "event_count", "stopped", "usage")

    def __init__(self) -> None:
        self._message: dict[str, Any] | None = None
        self._blocks: list[dict[str, Any]] = []
        self._json_parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.event_count = 0
        self.stopped = False

    @property
    def started(self) -> bool:
        return self._message is not None

    def observe(self, event: Mapping[str, Any]) -> None:
        self.event_count += 1
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event["delta"]
            block = self._block(event)
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif dtype == "input_json_delta":
                self._json_parts.setdefault(event["index"], []).append(delta["partial_json"])
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif dtype == "signature_delta":
                block["signature"] = delta["signature"]
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
        elif kind == "message_start":
            message = dict(event["message"])
            self._blocks = [dict(b) for b in message.get("content") or []]
            message["content"] = self._blocks
            self._message = message
            self.usage = dict(message.get("usage") or {})
        elif kind == "content_block_start":
            if self._message is None:
                raise MalformedStream("content_block_start before message_start")
            index = event["index"]
            while len(self._blocks) <= index:
                self._blocks.append({})
            self._blocks[index] = copy.deepcopy(event["content_block"])
        elif kind == "content_block_stop":
            index = event["index"]
            parts = self._json_parts.pop(index, None)
            if parts is not None:
                raw = "".join(parts)
                block = self._block(event)
                try:
                    block["input"] = json.loads(raw) if raw else {}
                except ValueError:  # fine-grained tool streaming may send invalid JSON
                    block["input"] = raw
        elif kind == "message_delta":
            if self._message is None:
                raise MalformedStream("message_delta before message_start")
            self._message.update(event.get("delta") or {})
            usage = event.get("usage")
            if usage:
                self.usage.update({k: v for k, v in usage.items() if v is not None})
                self._message["usage"] = dict(self.usage)
        elif kind == "message_stop":
            self.stopped = True

    def _block(self, event: Mapping[str, Any]) -> dict[str, Any]:
        try:
            block: dict[str, Any] = self._blocks[int(event["index"])]
            return block
        except (IndexError, KeyError, TypeError):
            raise MalformedStream("a delta for a block that never started") from None

    def message(self) -> dict[str, Any] | None:
        """The message so far (a copy), or ``None`` before ``message_start``."""
        if self._message is None:
            return None
        message = dict(self._message)
        message["content"] = [dict(b) for b in self._blocks]
        message["usage"] = dict(self.usage)
        return message

    def text(self) -> str:
        return "".join(b.get("text", "") for b in self._blocks if b.get("type") == "text")

    @property
    def stop_reason(self) -> str | None:
        return self._message.get("stop_reason") if self._message is not None else None


class StreamRelay:
    """One attempt's event stream: bytes in, forwardable events out, and what the record
    needs at the end (the assembled message, the digest and size of the bytes received).

    An ``error`` event raises :class:`StreamErrorEvent`; a frame whose data is not a JSON
    object raises :class:`MalformedStream`. ``ping`` is consumed, not forwarded. ``decoder``
    is the transport's framing (server-sent events unless given).
    """

    __slots__ = ("_decoder", "_hash", "assembler", "byte_count")

    def __init__(self, decoder: FrameDecoder | None = None) -> None:
        self._decoder = SSEDecoder() if decoder is None else decoder
        self._hash = hashlib.sha256()
        self.byte_count = 0
        self.assembler = MessageAssembler()

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._hash.update(chunk)
        self.byte_count += len(chunk)
        out: list[dict[str, Any]] = []
        for name, data in self._decoder.feed(chunk):
            if name == "error":
                try:
                    body: object = json.loads(data)
                except ValueError:
                    body = data
                raise StreamErrorEvent(body, out)
            if name in SKIPPED_EVENTS or not data:
                continue
            try:
                event = json.loads(data)
            except ValueError:
                raise MalformedStream("an event whose data is not JSON") from None
            if not isinstance(event, dict):
                raise MalformedStream("an event whose data is not a JSON object")
            self.assembler.observe(event)
            out.append(event)
        return out

    @property
    def complete(self) -> bool:
        return self.assembler.stopped

    @property
    def event_count(self) -> int:
        return self.assembler.event_count

    def digest(self) -> str:
        return f"sha256:{self._hash.hexdigest()}"

    def message(self) -> dict[str, Any]:
        """The final message; :class:`MalformedStream` when the stream never completed one."""
        message = self.assembler.message()
        if message is None or not self.assembler.stopped:
            raise MalformedStream("the stream ended before message_stop")
        return message


def message_events(message: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The events a stream of ``message`` carries: what a replay hit streams.

    Text arrives as one delta per block (the recorded answer is whole; nothing is gained by
    cutting it up again), tool input as one ``input_json_delta``, thinking as one
    ``thinking_delta`` and its ``signature_delta``.
    """
    usage = dict(message.get("usage") or {})
    start_usage = {**usage, "output_tokens": min(1, int(usage.get("output_tokens") or 0))}
    yield {
        "type": "message_start",
        "message": {
            **{k: v for k, v in message.items() if k not in ("content", "usage")},
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        },
    }
    for index, block in enumerate(message.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            start = {k: v for k, v in block.items() if k != "citations"} | {"text": ""}
            yield {"type": "content_block_start", "index": index, "content_block": start}
            yield _delta(index, {"type": "text_delta", "text": block.get("text", "")})
        elif kind in ("tool_use", "server_tool_use"):
            start = {**block, "input": {}}
            yield {"type": "content_block_start", "index": index, "content_block": start}
            raw = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
            yield _delta(index, {"type": "input_json_delta", "partial_json": raw})
        elif kind == "thinking":
            start = {**block, "thinking": "", "signature": ""}
            yield {"type": "content_block_start", "index": index, "content_block": start}
            yield _delta(index, {"type": "thinking_delta", "thinking": block.get("thinking", "")})
            if block.get("signature"):
                yield _delta(index, {"type": "signature_delta", "signature": block["signature"]})
        else:  # redacted thinking and anything newer: the whole block at its start
            yield {"type": "content_block_start", "index": index, "content_block": dict(block)}
        yield {"type": "content_block_stop", "index": index}
    delta: dict[str, Any] = {
        "stop_reason": message.get("stop_reason"),
        "stop_sequence": message.get("stop_sequence"),
    }
    if message.get("stop_details") is not None:
        delta["stop_details"] = message["stop_details"]
    yield {"type": "message_delta", "delta": delta, "usage": usage}
    yield {"type": "message_stop"}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}
