"""What the client tests assert about the gateway's answers and its audit log."""

from __future__ import annotations

import re
from typing import Any

from audit import StoredEvent
from tests.server.conftest import ServerProcess

__all__ = ["POLICY_KEY", "assert_refused_by_policy", "requests_of"]

# What a refusal names besides the policy: a policy key (`prompt.system_file`,
# `caller.max_tokens`) or the request field the policy does not open (`tool_choice`).
POLICY_KEY = re.compile(
    r"\b(?:prompt|tools|caller|output|generation|input|model)\.[a-z_]+\b"
    r"|\b(?:max_tokens|system|tools|tool_choice|thinking|temperature|top_p|top_k|metadata"
    r"|output_config|stop_sequences|context_management|anthropic-beta)\b"
)


def assert_refused_by_policy(verdict: dict[str, Any], policy: str = "compliance_review") -> None:
    """The client got a 400 whose message names the policy and the policy key it broke."""
    assert "error" in verdict, f"not refused: {verdict}"
    error = verdict["error"]
    assert error["status"] == 400, error
    assert policy in error["message"] and POLICY_KEY.search(error["message"]), error


def requests_of(server: ServerProcess, caller: str) -> list[StoredEvent]:
    """The caller's REQUEST/RESPONSE events, in log order."""
    return [
        event
        for event in server.audit_events()
        if event.caller == caller and str(event.kind) in ("request", "response")
    ]
