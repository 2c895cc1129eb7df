"""The offline provider: a word-level n-gram language model built from text shipped with the
package, answering Messages-API request bodies with every sampling parameter honoured exactly.

    provider = LocalProvider()
    reply = provider.complete(
        {"model": "local:ngram", "max_tokens": 20, "temperature": 0.7, "top_p": 0.9,
         "messages": [{"role": "user", "content": "The reviewer reads the"}]},
        rng=np.random.default_rng(7),
    )
    reply.response["content"][0]["text"], provider.model_version("local:ngram")

Models (``KNOWN_MODELS``): ``local:ngram`` is a trigram model, ``local:ngram-draft`` its bigram
draft over the same vocabulary (for speculative decoding). Both are built lazily, in a few
milliseconds, from ``gateway/providers/corpus/*.txt``.

The model itself is in ``gateway.providers._ngram``; what a body may hold, and the refusal of
anything else, in ``gateway.providers._local_request``. This module answers: it samples,
stops, streams and shapes the reply as the Messages API would.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import time
from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.canonical import canonical_bytes
from gateway.providers._local_request import (
    LocalRequest,
    LocalRequestError,
    first_stop,
    parse_request,
)
from gateway.providers._local_tools import tool_call
from gateway.providers._ngram import (
    EOS,
    KNOWN_MODELS,
    NGramModel,
    Vocabulary,
    corpus_paragraphs,
    detokenize,
    tokenize,
)
from gateway.providers.base import (
    AsyncOnAttemptFailed,
    AsyncOnWire,
    OnAttemptFailed,
    OnWire,
    ProviderReply,
    StreamFacts,
    StreamItem,
)
from gateway.providers.stream import message_events
from gateway.sampling import sample

__all__ = [
    "KNOWN_MODELS",
    "LocalProvider",
    "LocalReply",
    "LocalRequestError",
    "detokenize",
    "tokenize",
]


@dataclass(frozen=True)
class LocalReply:
    response: dict[str, Any]  # Messages-API shaped
    raw: bytes  # the JSON bytes of ``response``, as a provider would have received them


class LocalProvider:
    """Answers Messages-API bodies for ``local:*`` models offline. Models are built on first use.

    A :class:`gateway.providers.base.Provider`: there is no wire, so the bytes "sent" are the
    body's canonical form, and there are no attempts to fail (a body it cannot honour raises
    :class:`LocalRequestError`).
    """

    name = "local"

    def __init__(self) -> None:
        self._models: dict[str, NGramModel] = {}
        self._vocab: Vocabulary | None = None
        self._paragraphs: list[list[str]] | None = None

    @staticmethod
    def known_models() -> tuple[str, ...]:
        return tuple(KNOWN_MODELS)

    def model(self, model_id: str) -> NGramModel:
        """The language model behind ``model_id`` (for decoding strategies and benchmarks)."""
        if model_id not in KNOWN_MODELS:
            raise LocalRequestError(
                f"unknown local model {model_id!r}.",
                hint=f"Known models: {', '.join(KNOWN_MODELS)}.",
            )
        if model_id not in self._models:
            if self._paragraphs is None or self._vocab is None:
                self._paragraphs = corpus_paragraphs()
                self._vocab = Vocabulary.from_paragraphs(self._paragraphs)
            self._models[model_id] = NGramModel(
                self._paragraphs, self._vocab, KNOWN_MODELS[model_id]
            )
        return self._models[model_id]

    def model_version(self, model_id: str) -> str:
        return self.model(model_id).version

    # -- the Provider protocol ---------------------------------------------------------------

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes:
        return canonical_bytes(dict(body))

    def count_tokens(
        self, body: Mapping[str, Any], *, api_version: str, on_wire: OnWire | None = None
    ) -> int:
        """The prompt's tokens as the model reads them (system and messages, tool results
        included), by its own tokenizer: the ``usage.input_tokens`` an answer would report.
        The whole body is what it reads, so that is what ``on_wire`` is told."""
        if on_wire is not None:
            on_wire(self.wire_bytes(body))
        return len(tokenize(parse_request(body).prompt))

    def send(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | None = None,
    ) -> ProviderReply:
        wire = self.wire_bytes(body)
        if on_wire is not None:
            on_wire(wire)
        return self._send(body, wire)

    def _send(self, body: Mapping[str, Any], wire: bytes) -> ProviderReply:
        started = time.perf_counter()
        reply = self.complete(body)
        return ProviderReply(
            status=200,
            response=reply.response,
            response_bytes=reply.raw,
            request_bytes=wire,
            upstream_request_id=None,
            latency_ms=(time.perf_counter() - started) * 1000,
            attempts=1,
            rate_limits={},
        )

    async def asend(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | AsyncOnWire | None = None,
    ) -> ProviderReply:
        wire = self.wire_bytes(body)
        await _told(on_wire, wire)
        # CPU-bound: generation runs in a worker thread, so the event loop runs on.
        return await asyncio.to_thread(self._send, body, wire)

    def stream(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | None = None,
    ) -> Generator[StreamItem, None, None]:
        """The answer token by token, as Messages API stream events, then the reply: the
        same message ``send`` would give for the same random state."""
        wire = self.wire_bytes(body)
        if on_wire is not None:
            on_wire(wire)
        yield from self._stream(body, wire)

    def _stream(self, body: Mapping[str, Any], wire: bytes) -> Generator[StreamItem, None, None]:
        started = time.perf_counter()
        relay = _LocalRelay()
        for item in self.stream_complete(body):
            if isinstance(item, LocalReply):
                yield relay.reply(item, wire, started)
                return
            relay.seen(item)
            yield item

    async def astream(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | AsyncOnWire | None = None,
    ) -> AsyncIterator[StreamItem]:
        wire = self.wire_bytes(body)
        await _told(on_wire, wire)
        # CPU-bound: each step runs in a worker thread, so the event loop runs on. A step that
        # is running when the caller stops finishes in its thread; the generator is then let go.
        steps = self._stream(body, wire)
        done = object()
        try:
            while True:
                item = await asyncio.to_thread(next, steps, done)
                if item is done:
                    return
                yield item  # type: ignore[misc]  # not the sentinel
        finally:
            with contextlib.suppress(ValueError):  # "generator already executing"
                steps.close()

    def close(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def complete(
        self, body: Mapping[str, Any], *, rng: np.random.Generator | None = None
    ) -> LocalReply:
        request = parse_request(body)
        rng = rng if rng is not None else np.random.default_rng()
        call = tool_call(body, request.prompt, rng)
        if call is not None:
            return self._tool_reply(request, call, rng)
        generation = self._generate(request, rng)
        while True:
            try:
                next(generation)
            except StopIteration as end:
                return self._reply(request, end.value, rng)

    def stream_complete(
        self, body: Mapping[str, Any], *, rng: np.random.Generator | None = None
    ) -> Iterator[dict[str, Any] | LocalReply]:
        """:meth:`complete` as stream events (a ``text_delta`` per token, held back only
        while it could be the start of a stop sequence), then the :class:`LocalReply`.

        The same ``rng`` state gives the same tokens and text as :meth:`complete`; the stream's
        message id is drawn from a child of ``rng``, so it never shifts a sampled token."""
        if body.get("stream") is not True:
            raise LocalRequestError("a streamed body has stream = true.")
        request = parse_request({k: v for k, v in body.items() if k != "stream"})
        rng = rng if rng is not None else np.random.default_rng()
        call = tool_call(body, request.prompt, rng)
        if call is not None:
            reply = self._tool_reply(request, call, rng)
            yield from message_events(reply.response)
            yield reply
            return
        message_id = f"msg_local_{rng.spawn(1)[0].bytes(12).hex()}"
        yield {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": request.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": len(tokenize(request.prompt)), "output_tokens": 0},
            },
        }
        yield {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        }
        sent = 0
        generation = self._generate(request, rng)
        while True:
            try:
                safe_text = next(generation)
            except StopIteration as end:
                generated: _Generated = end.value
                break
            if len(safe_text) > sent:
                piece, sent = safe_text[sent:], len(safe_text)
                yield {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                }
        reply = self._reply(request, generated, rng)
        response = dict(reply.response, id=message_id)
        reply = LocalReply(response=response, raw=_json_bytes(response))
        yield {"type": "content_block_stop", "index": 0}
        yield {
            "type": "message_delta",
            "delta": {
                "stop_reason": response["stop_reason"],
                "stop_sequence": response["stop_sequence"],
            },
            "usage": {"output_tokens": response["usage"]["output_tokens"]},
        }
        yield {"type": "message_stop"}
        yield reply

    def _generate(
        self, request: LocalRequest, rng: np.random.Generator
    ) -> Generator[str, None, _Generated]:
        """Sample the answer, yielding after each token the text that can no longer change
        (the text so far, less what might be the start of a stop sequence); returns the
        final text, stop reason and token count."""
        model = self.model(request.model)
        vocab = model.vocab
        context = vocab.ids(tokenize(request.prompt))
        eos = vocab.index[EOS]
        longest_stop = max((len(s) for s in request.stop_sequences), default=0)
        words: list[str] = []
        text = ""
        stop_reason, stop_sequence = "max_tokens", None
        while len(words) < request.max_tokens:
            token = sample(
                model.next_logits([context])[0],
                rng=rng,
                temperature=request.temperature,
                top_k=request.top_k,
                top_p=request.top_p,
                min_p=request.min_p,
            )
            if token == eos:
                stop_reason = "end_turn"
                break
            context.append(token)
            words.append(vocab.words[token])
            previous_length = len(text)
            text = detokenize(words)
            hit = first_stop(text, request.stop_sequences, max(0, previous_length - longest_stop))
            if hit is not None:
                text = text[: hit[0]]
                stop_reason, stop_sequence = "stop_sequence", hit[1]
                break
            # A later stop sequence starts at or after len(text) - longest_stop (see the
            # search above), so everything before that is final.
            yield text[: max(0, len(text) - longest_stop)]
        yield text
        return _Generated(text, stop_reason, stop_sequence, len(words))

    def _tool_reply(
        self, request: LocalRequest, call: dict[str, Any], rng: np.random.Generator
    ) -> LocalReply:
        response: dict[str, Any] = {
            "id": f"msg_local_{rng.bytes(12).hex()}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [call],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": len(tokenize(request.prompt)), "output_tokens": 0},
        }
        return LocalReply(response=response, raw=_json_bytes(response))

    def _reply(
        self, request: LocalRequest, generated: _Generated, rng: np.random.Generator
    ) -> LocalReply:
        # The id is drawn after generation, so it never shifts the sampled tokens; with a seeded
        # rng the whole reply, id included, is reproducible.
        suffix = rng.bytes(12).hex()
        response: dict[str, Any] = {
            "id": f"msg_local_{suffix}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [{"type": "text", "text": generated.text}],
            "stop_reason": generated.stop_reason,
            "stop_sequence": generated.stop_sequence,
            "usage": {
                "input_tokens": len(tokenize(request.prompt)),
                "output_tokens": generated.tokens,
            },
        }
        return LocalReply(response=response, raw=_json_bytes(response))


@dataclass(frozen=True)
class _Generated:
    text: str
    stop_reason: str
    stop_sequence: str | None
    tokens: int


def _json_bytes(response: Mapping[str, Any]) -> bytes:
    return json.dumps(response, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class _LocalRelay:
    """The stream facts of a local answer: the events are made here, so their "bytes" are
    their JSON, and the first token is the first delta."""

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._first: float | None = None
        self._events = 0
        self._bytes = 0
        self._hash = hashlib.sha256()

    def seen(self, event: Mapping[str, Any]) -> None:
        self._events += 1
        raw = _json_bytes(event) + b"\n"
        self._hash.update(raw)
        self._bytes += len(raw)
        if self._first is None and event["type"] == "content_block_delta":
            self._first = time.perf_counter()

    def reply(self, local: LocalReply, wire: bytes, started: float) -> ProviderReply:
        now = time.perf_counter()
        first = None if self._first is None else round((self._first - started) * 1000, 3)
        return ProviderReply(
            status=200,
            response=local.response,
            response_bytes=local.raw,
            request_bytes=wire,
            upstream_request_id=None,
            latency_ms=(now - started) * 1000,
            attempts=1,
            rate_limits={},
            stream=StreamFacts(
                events_digest=f"sha256:{self._hash.hexdigest()}",
                event_bytes=self._bytes,
                events=self._events,
                first_event_ms=round((self._started - started) * 1000, 3),
                first_token_ms=first,
            ),
        )


def _never_called(_failure: object) -> None:  # the local model has no attempts to fail
    return None


async def _told(on_wire: OnWire | AsyncOnWire | None, wire: bytes) -> None:
    if on_wire is not None:
        outcome = on_wire(wire)
        if inspect.isawaitable(outcome):
            await outcome
