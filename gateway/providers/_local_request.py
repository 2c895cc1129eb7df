"""What the local model accepts: a Messages-API body checked and typed, or a clear refusal.

The local model never drops a parameter: a key it cannot honour, a block it cannot read or a
sampling value out of range is a :class:`LocalRequestError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from gateway.providers._ngram import KNOWN_MODELS
from gateway.providers.base import RequestNotHonoured
from gateway.sampling.processors import validate_parameters


class LocalRequestError(RequestNotHonoured, ValueError):
    """A request body the local model cannot honour exactly. A ValueError too, so plain
    callers of the sampling API can catch it the same way as a bad sampling parameter."""

    error_type = "local_request_error"
    summary = "the local model could not honour this request."


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


class LocalRequest(BaseModel):
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


def parse_request(body: Mapping[str, Any]) -> LocalRequest:
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
    request = LocalRequest(
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


def first_stop(text: str, stops: Sequence[str], start: int) -> tuple[int, str] | None:
    """Earliest occurrence at or after ``start`` of any stop sequence (longest wins a tie)."""
    found = [(pos, -len(s), s) for s in stops if (pos := text.find(s, start)) >= 0]
    if not found:
        return None
    pos, _, stop = min(found)
    return pos, stop
