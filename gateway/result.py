"""What a caller gets back from ``Gateway.complete``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolUse:
    """One tool call in an answer: answer it with a ``tool_result`` block naming ``id``."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Result:
    """One answered request.

    ``seq`` is the audit sequence number of the record that proves the answer: the RESPONSE
    event, or the CACHE_HIT event when ``cached`` is true (the served response's own seq is in
    that event).
    """

    text: str
    json: Any
    request_id: str
    request_hash: str
    seq: int
    cached: bool
    model: str
    usage: dict[str, Any] = field(default_factory=dict)
    policy_fingerprint: str = ""
    stop_reason: str | None = None
    # Which of the request's stop_sequences the answer stopped at (stop_reason "stop_sequence").
    stop_sequence: str | None = None
    # The answer's content blocks as received, and its tool calls for convenience.
    content: tuple[dict[str, Any], ...] = ()
    tool_uses: tuple[ToolUse, ...] = ()
    # Values the policy lowered to its ceiling ([caller] max_tokens with over = "cap"), e.g.
    # {"max_tokens": 8192}; the value the caller sent is in the REQUEST's ``requested``.
    capped: Mapping[str, int] = field(default_factory=dict)
    # What in the answer differs from what its policy pinned ("model", "inference_geo",
    # "context_management"): each recorded as an ANSWER_ALERT event and raised to the caller
    # as an AnswerAlertWarning. Empty for an answer that matched (every cache hit does).
    alerts: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "json": self.json,
            "request_id": self.request_id,
            "request_hash": self.request_hash,
            "seq": self.seq,
            "cached": self.cached,
            "model": self.model,
            "usage": self.usage,
            "policy_fingerprint": self.policy_fingerprint,
            "stop_reason": self.stop_reason,
            "stop_sequence": self.stop_sequence,
            "content": list(self.content),
            "tool_uses": [{"id": t.id, "name": t.name, "input": t.input} for t in self.tool_uses],
            "capped": dict(self.capped),
            "alerts": list(self.alerts),
        }


def answer_blocks(
    response: Mapping[str, Any],
) -> tuple[tuple[dict[str, Any], ...], tuple[ToolUse, ...]]:
    """An answer's content blocks (objects only) and the well-formed tool calls among them."""
    raw = response.get("content")
    blocks = tuple(b for b in raw if isinstance(b, dict)) if isinstance(raw, list) else ()
    uses = tuple(
        ToolUse(id=b["id"], name=b["name"], input=b["input"])
        for b in blocks
        if b.get("type") == "tool_use"
        and isinstance(b.get("id"), str)
        and isinstance(b.get("name"), str)
        and isinstance(b.get("input"), dict)
    )
    return blocks, uses
