"""Policies that send claude-sonnet-4-6 over a cloud transport, for the cloud tests.

(policy_dir / "cloud_summary.toml").write_text(summary_policy("bedrock"))
"""

from __future__ import annotations

__all__ = ["MODEL_LINES", "summary_policy"]

# The [model] lines that send the model over each transport ("anthropic": its own API).
MODEL_LINES = {
    "anthropic": "",
    "bedrock": 'transport = "bedrock"\ntransport_id = "eu.anthropic.claude-sonnet-4-6"\n'
    'region = "eu-central-1"\n',
    "vertex": 'transport = "vertex"\nregion = "europe-west1"\n',
}

_SUMMARY = """schema = 1
description = "Counterparty summaries through Claude on {transport}."
owner = "risk"
risk_tier = "medium"

[model]
id = "claude-sonnet-4-6"
{model}
[generation]
max_tokens = 256

[output]
format = "text"

[cache]
mode = "replay"
{rest}"""


def summary_policy(transport: str, *, rest: str = "") -> str:
    """A text task answered by replay when repeated; ``rest``: more tables (a [caller])."""
    return _SUMMARY.format(transport=transport, model=MODEL_LINES[transport], rest=rest)
