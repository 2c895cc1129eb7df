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

The model. Text is lower-cased and split into words and punctuation marks; every corpus
paragraph is one training sequence framed by ``<s>`` and ``</s>``. Probabilities are
interpolated recursively with a Dirichlet prior (Witten-Bell-like):
``P_n(w | h) = (c(h w) + beta * P_{n-1}(w | h')) / (c(h) + beta)``, ending in an add-one
unigram, so every word has non-zero probability and the distribution sums to one. Logits are
the log-probabilities; ``<s>`` and ``<unk>`` are masked (-inf) so they are never generated.
The hidden state at a position is a fixed random projection (seeded Gaussian embeddings, 64
dimensions) of the exponentially decayed counts of the last four tokens: two positions look
alike when their recent contexts do, which is what contrastive search needs.

The model version is ``sha256:`` over the canonical JSON of everything that determines the
outputs (vocabulary, n-gram counts, beta, embedding seed and shape), so a corpus or hyper-
parameter change is a new model version in the audit log.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.resources
import json
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from audit.canonical import canonical_bytes, canonical_digest
from gateway.providers._local_tools import tool_call
from gateway.providers._stream import message_events
from gateway.providers.base import (
    AsyncOnAttemptFailed,
    OnAttemptFailed,
    ProviderReply,
    RequestNotHonoured,
    StreamFacts,
    StreamItem,
)
from gateway.sampling import sample
from gateway.sampling.processors import validate_parameters

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
_TOKEN = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*|[.,;:!?]")
_NO_SPACE_BEFORE = frozenset(".,;:!?")
_BETA = 1.0
_STATE_DIM = 64
_STATE_WINDOW = 4
_STATE_DECAY = 0.5
_EMBEDDING_SEED = 20261130

# model id -> n-gram order. The draft shares the target's vocabulary (speculative decoding
# compares the two distributions token by token) but sees one word of context less.
KNOWN_MODELS: Mapping[str, int] = {"local:ngram": 3, "local:ngram-draft": 2}


class LocalRequestError(RequestNotHonoured, ValueError):
    """A request body the local model cannot honour exactly. A ValueError too, so plain
    callers of the sampling API can catch it the same way as a bad sampling parameter."""

    error_type = "local_request_error"
    summary = "the local model could not honour this request."


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def detokenize(words: Iterable[str]) -> str:
    out: list[str] = []
    for word in words:
        if out and word not in _NO_SPACE_BEFORE:
            out.append(" ")
        out.append(word)
    return "".join(out)


def _corpus_paragraphs() -> list[list[str]]:
    folder = importlib.resources.files("gateway.providers").joinpath("corpus")
    paragraphs: list[list[str]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".txt"):
            continue
        # The first paragraph of each file is its licence header, not training text.
        blocks = entry.read_text(encoding="utf-8").split("\n\n")[1:]
        paragraphs.extend(tokens for b in blocks if (tokens := tokenize(b)))
    return paragraphs


@dataclass(frozen=True)
class _Vocabulary:
    words: tuple[str, ...]
    index: Mapping[str, int] = field(repr=False)

    @classmethod
    def from_paragraphs(cls, paragraphs: Sequence[Sequence[str]]) -> _Vocabulary:
        corpus_words = sorted({w for p in paragraphs for w in p})
        words = (BOS, EOS, UNK, *corpus_words)
        return cls(words, {w: i for i, w in enumerate(words)})

    def ids(self, words: Iterable[str]) -> list[int]:
        unk = self.index[UNK]
        return [self.index.get(w, unk) for w in words]


class NGramModel:
    """A smoothed word n-gram model; implements ``gateway.sampling.LanguageModel``."""

    def __init__(self, paragraphs: Sequence[Sequence[str]], vocab: _Vocabulary, order: int):
        self.order = order
        self.vocab = vocab
        size = len(vocab.words)
        counts: list[Counter[tuple[int, ...]]] = [Counter() for _ in range(order + 1)]
        for paragraph in paragraphs:
            ids = [vocab.index[BOS]] * (order - 1) + vocab.ids(paragraph) + [vocab.index[EOS]]
            for end in range(order - 1, len(ids)):
                for n in range(1, order + 1):
                    counts[n][tuple(ids[end - n + 1 : end + 1])] += 1
        self._counts = counts
        unigram = np.ones(size)
        for (word,), c in counts[1].items():
            unigram[word] += c
        # Never generated, so they get no mass (their logit is -inf); EOS keeps its count.
        unigram[[vocab.index[BOS], vocab.index[UNK]]] = 0.0
        self._unigram = unigram / unigram.sum()
        # history tuple -> (next ids, their counts, total) for each order above the unigram.
        self._tables: list[
            dict[tuple[int, ...], tuple[npt.NDArray[np.intp], npt.NDArray[np.float64], float]]
        ] = [{} for _ in range(order + 1)]
        for n in range(2, order + 1):
            grouped: dict[tuple[int, ...], dict[int, int]] = {}
            for gram, c in counts[n].items():
                grouped.setdefault(gram[:-1], {})[gram[-1]] = c
            for history, nexts in grouped.items():
                ids_arr = np.fromiter(nexts.keys(), dtype=np.intp)
                vals = np.fromiter(nexts.values(), dtype=np.float64)
                self._tables[n][history] = (ids_arr, vals, float(vals.sum()))
        self._embeddings = np.random.default_rng(_EMBEDDING_SEED).normal(
            0.0, 1.0 / np.sqrt(_STATE_DIM), size=(size, _STATE_DIM)
        )

    @property
    def vocab_size(self) -> int:
        return len(self.vocab.words)

    def _distribution(self, context: Sequence[int]) -> npt.NDArray[np.float64]:
        padded = [self.vocab.index[BOS]] * (self.order - 1) + list(context)
        probs: npt.NDArray[np.float64] = self._unigram
        for n in range(2, self.order + 1):
            entry = self._tables[n].get(tuple(padded[len(padded) - n + 1 :]))
            if entry is not None:
                ids, vals, total = entry
                probs = probs * _BETA
                probs[ids] += vals
                probs = probs / (total + _BETA)
        return probs

    def next_logits(self, contexts: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
        rows = np.array([self._distribution(c) for c in contexts])
        logits: npt.NDArray[np.float64] = np.full(rows.shape, -np.inf)
        np.log(rows, out=logits, where=rows > 0)
        return logits

    def hidden_states(self, contexts: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
        weights = _STATE_DECAY ** np.arange(_STATE_WINDOW)
        out = np.zeros((len(contexts), _STATE_DIM))
        for row, context in enumerate(contexts):
            recent = list(context)[::-1][:_STATE_WINDOW]
            out[row] = weights[: len(recent)] @ self._embeddings[recent]
        return out

    @cached_property
    def version(self) -> str:
        weights = {
            "format": "gateway-ngram-1",
            "order": self.order,
            "beta": _BETA,
            "vocabulary": list(self.vocab.words),
            "counts": sorted(
                [*gram, c] for n in range(1, self.order + 1) for gram, c in self._counts[n].items()
            ),
            "state": {
                "seed": _EMBEDDING_SEED,
                "dim": _STATE_DIM,
                "window": _STATE_WINDOW,
                "decay": _STATE_DECAY,
            },
        }
        return canonical_digest(weights)


_BODY_KEYS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "metadata",
        "stream",
        "tools",  # answered with a canned, schema-valid call (gateway.providers._local_tools)
        "tool_choice",
    }
)


class _Request(BaseModel):
    """The parts of a request body that decide the output, checked and typed."""

    model_config = ConfigDict(frozen=True)

    model: str
    max_tokens: int
    prompt: str
    stop_sequences: tuple[str, ...] = ()
    temperature: float = 1.0  # the Messages API default
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                continue  # an earlier call of ours: what it asked is in its result
            if isinstance(block, dict) and block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content") or "", f"{where} tool_result"))
                continue
            if not (
                isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ):
                raise LocalRequestError(
                    f"{where} holds a block the local model cannot read: {block!r:.80}.",
                    hint="The local model reads only text (a string or text blocks).",
                )
            parts.append(block["text"])
        return "\n\n".join(parts)
    raise LocalRequestError(f"{where} must be a string or a list of text blocks.")


def _number(body: Mapping[str, Any], key: str, kind: type) -> Any:
    value = body.get(key)
    if value is None:
        return None
    ok = isinstance(value, int | float) if kind is float else isinstance(value, int)
    if isinstance(value, bool) or not ok:
        raise LocalRequestError(f"{key} must be a number, got {value!r}.")
    return float(value) if kind is float else value


def _parse(body: Mapping[str, Any]) -> _Request:
    unknown = sorted(set(body) - _BODY_KEYS)
    if unknown:
        raise LocalRequestError(
            f"the local model cannot honour {', '.join(unknown)}.",
            hint=f"It supports {', '.join(sorted(_BODY_KEYS))}; it never drops a parameter.",
        )
    model = body.get("model")
    if model not in KNOWN_MODELS:
        raise LocalRequestError(
            f"unknown local model {model!r}.", hint=f"Known models: {', '.join(KNOWN_MODELS)}."
        )
    if body.get("stream"):
        raise LocalRequestError("the local model does not stream.", hint="Leave stream unset.")
    max_tokens = _number(body, "max_tokens", int)
    if max_tokens is None or max_tokens < 1:
        raise LocalRequestError(f"max_tokens must be an integer >= 1, got {max_tokens!r}.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise LocalRequestError("messages must be a non-empty list.")
    texts = [_text_of(body["system"], "system")] if body.get("system") is not None else []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise LocalRequestError(f"messages[{i}] needs a role of 'user' or 'assistant'.")
        texts.append(_text_of(message.get("content"), f"messages[{i}].content"))
    stops = body.get("stop_sequences") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise LocalRequestError("stop_sequences must be a list of non-empty strings.")
    request = _Request(
        model=model,
        max_tokens=max_tokens,
        prompt="\n\n".join(texts),
        stop_sequences=tuple(stops),
        temperature=_number(body, "temperature", float)
        if body.get("temperature") is not None
        else 1.0,
        top_p=_number(body, "top_p", float),
        top_k=_number(body, "top_k", int),
        min_p=_number(body, "min_p", float),
    )
    try:
        validate_parameters(
            temperature=request.temperature,
            top_k=request.top_k,
            top_p=request.top_p,
            min_p=request.min_p,
        )
    except ValueError as exc:
        raise LocalRequestError(f"{exc}.") from exc
    return request


def _first_stop(text: str, stops: Sequence[str], start: int) -> tuple[int, str] | None:
    """Earliest occurrence at or after ``start`` of any stop sequence (longest wins a tie)."""
    found = [(pos, -len(s), s) for s in stops if (pos := text.find(s, start)) >= 0]
    if not found:
        return None
    pos, _, stop = min(found)
    return pos, stop


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
        self._vocab: _Vocabulary | None = None
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
                self._paragraphs = _corpus_paragraphs()
                self._vocab = _Vocabulary.from_paragraphs(self._paragraphs)
            self._models[model_id] = NGramModel(
                self._paragraphs, self._vocab, KNOWN_MODELS[model_id]
            )
        return self._models[model_id]

    def model_version(self, model_id: str) -> str:
        return self.model(model_id).version

    # -- the Provider protocol ---------------------------------------------------------------

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes:
        return canonical_bytes(dict(body))

    def count_tokens(self, body: Mapping[str, Any], *, api_version: str) -> int:
        """The prompt's tokens as the model reads them (system and messages, tool results
        included), by its own tokenizer: the ``usage.input_tokens`` an answer would report."""
        return len(tokenize(_parse(body).prompt))

    def send(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
    ) -> ProviderReply:
        started = time.perf_counter()
        reply = self.complete(body)
        return ProviderReply(
            status=200,
            response=reply.response,
            response_bytes=reply.raw,
            request_bytes=self.wire_bytes(body),
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
    ) -> ProviderReply:
        # CPU-bound: generation runs in a worker thread, so the event loop runs on.
        return await asyncio.to_thread(
            self.send, body, api_version=api_version, on_attempt_failed=_never_called
        )

    def stream(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
    ) -> Generator[StreamItem, None, None]:
        """The answer token by token, as Messages API stream events, then the reply: the
        same message ``send`` would give for the same random state."""
        started = time.perf_counter()
        relay = _LocalRelay()
        for item in self.stream_complete(body):
            if isinstance(item, LocalReply):
                yield relay.reply(item, self.wire_bytes(body), started)
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
    ) -> AsyncIterator[StreamItem]:
        # CPU-bound: each step runs in a worker thread, so the event loop runs on. A step that
        # is running when the caller stops finishes in its thread; the generator is then let go.
        steps = self.stream(body, api_version=api_version, on_attempt_failed=_never_called)
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
        request = _parse(body)
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
        request = _parse({k: v for k, v in body.items() if k != "stream"})
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
        self, request: _Request, rng: np.random.Generator
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
            hit = _first_stop(text, request.stop_sequences, max(0, previous_length - longest_stop))
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
        self, request: _Request, call: dict[str, Any], rng: np.random.Generator
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
        self, request: _Request, generated: _Generated, rng: np.random.Generator
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
