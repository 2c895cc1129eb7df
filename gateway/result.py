"""What a caller gets back from ``Gateway.complete``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
        }
