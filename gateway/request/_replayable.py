"""Whether a recorded answer can stand for the request again: not when the model could reach
the outside world through a provider-run tool (web search, web fetch, code execution, MCP).

    reason = outside_world(policy)   # None, or one sentence naming the tool types

Such an answer depends on what the world held at the time of the call, so the replay cache
never serves it and ``gateway replay`` reports it as not replayable rather than as a pass or
a mismatch. The policy decides, not the answer: a model that chose not to search still might
have, and a record must not be replayable or not by the model's choice.
"""

from __future__ import annotations

from gateway.policy import Policy
from gateway.policy.rules.tools import is_client_tool


def outside_world(policy: Policy) -> str | None:
    """Why answers under ``policy`` cannot be replayed, or None when they can."""
    kinds = sorted(
        {str(t.get("type")) for t in policy.tools.definitions or () if not is_client_tool(t)}
        # Server tools a caller may bring: whether the caller used one is not the policy's.
        | set(policy.caller.tools.server if policy.caller.tools is not None else ())
    )
    if not kinds:
        return None
    return (
        f"its policy lets the model use provider-run tools ({', '.join(kinds)}), so the answer "
        "depends on the outside world at the time of the call and cannot be replayed."
    )
