"""What `gateway policy show TASK` prints: the effective settings of one task, as data (the
JSON form) and as the SETTING / VALUE rows of the text form.

    data = show_data(policy, tools_file, catalog)      # JSON-ready
    rows = show_rows(data)                             # [(setting, value), ...]

Tools, attachments and prompt caching are shown as what the policy allows, with what it
refuses said as plainly ("refused"), because a reviewer signs off on both.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from pydantic import BaseModel

from audit.canonical import canonical_digest, digest
from gateway.catalog import Catalog
from gateway.errors import PolicyLoadError
from gateway.policy import Policy, plan_request

PLACEHOLDER_INPUT = "<user input>"


def signoff_fields(data: Any, today: date) -> dict[str, Any]:
    """The sign-off fields of a PolicyFile or Policy, JSON-ready; ``in_effect`` is whether
    its effective date (if any) has come on ``today`` (before it, the gateway refuses it)."""
    effective = data.effective_date
    return {
        "owner": data.owner,
        "risk_tier": data.risk_tier,
        "effective_date": effective.isoformat() if effective else None,
        "in_effect": effective is None or effective <= today,
        "regulations": list(data.regulations),
    }


def effective_text(fields: dict[str, Any]) -> str:
    """The EFFECTIVE cell: the date, marked when it has not come yet."""
    if fields["effective_date"] is None:
        return "-"
    return str(fields["effective_date"]) + ("" if fields["in_effect"] else " (not yet)")


def _tools(policy: Policy, tools_file: str | None) -> dict[str, Any] | None:
    if policy.tools is None and not policy.server_tools:
        return None
    names = [t.get("name") for t in policy.tools or () if isinstance(t.get("name"), str)]
    return {
        "file": tools_file,
        "names": names,
        "choice": policy.tool_choice,
        "server": list(policy.server_tools),
    }


def _limits(limits: BaseModel | None) -> dict[str, Any] | None:
    return limits.model_dump(mode="json") if limits is not None else None


def show_data(
    policy: Policy, tools_file: str | None, catalog: Catalog, today: date
) -> dict[str, Any]:
    """``policy``'s effective settings and exact request template; ``tools_file`` is the
    ``[tools] file`` it was read from (the policy keeps the definitions, not their path);
    ``today`` the day its effective date is judged on (the policy set's)."""
    model = catalog.get(policy.model_id)
    if model is None:  # review refuses this; only a catalog override changed under us
        raise PolicyLoadError(f"model {policy.model_id!r} is not in the catalog.")
    plan = plan_request(policy, model, [{"role": "user", "content": PLACEHOLDER_INPUT}])
    prompt = policy.system_prompt
    return {
        "task": policy.task,
        "description": policy.description,
        **signoff_fields(policy, today),
        "reproducible": policy.reproducible,
        "model_id": policy.model_id,
        "provider": plan.provider,
        "api_version": plan.api_version,
        "cache_mode": policy.cache_mode,
        "output_format": policy.output_format,
        "stream": policy.stream,
        "effective": plan.effective,
        "caller": policy.caller.model_dump(mode="json", exclude_none=True),
        "system_prompt_digest": digest(prompt.encode()) if prompt is not None else None,
        "prompt_cache": policy.prompt_cache,
        "tools": _tools(policy, tools_file),
        "attachments": {
            "images": _limits(policy.input.images),
            "documents": _limits(policy.input.documents),
            "caller_cache_control": policy.input.cache_control,
        },
        "output_schema_digest": canonical_digest(policy.output_schema)
        if policy.output_schema is not None
        else None,
        "fingerprint": policy.fingerprint,
        "request_template": {"api_version": plan.api_version, "body": plan.body},
        "placeholder_input": PLACEHOLDER_INPUT,
    }


def _limits_text(limits: dict[str, Any] | None) -> str:
    if limits is None:
        return "refused"
    count = limits["max_count"]
    urls = "URL sources allowed" if limits["url"] else "base64 only (URL sources refused)"
    return f"up to {count} per request, {limits['max_bytes']:,} bytes each; {urls}"


def _tool_rows(tools: dict[str, Any] | None) -> list[tuple[str, str]]:
    if tools is None:
        return [("tools", "none")]
    return [
        ("tools.file", tools["file"] or "-"),
        ("tools.names", ", ".join(tools["names"]) or "-"),
        ("tools.choice", tools["choice"] or "-"),
        ("tools.server", ", ".join(tools["server"]) or "none allowed"),
    ]


def show_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The text form's rows, without approvals (the caller adds what the database says)."""
    attachments = data["attachments"]
    return [
        ("task", data["task"]),
        ("description", data["description"]),
        ("owner", data["owner"]),
        ("risk tier", data["risk_tier"] or "-"),
        (
            "effective date",
            effective_text(data).replace(
                "(not yet)", "(not yet in effect: the gateway refuses its requests until then)"
            ),
        ),
        ("regulations", "; ".join(data["regulations"]) or "-"),
        ("model", f"{data['model_id']} ({data['provider']}, API {data['api_version']})"),
        ("reproducible", "yes" if data["reproducible"] else "no"),
        ("cache mode", data["cache_mode"]),
        ("output", data["output_format"]),
        ("stream", data["stream"]),
        *[(f"generation.{k}", json.dumps(v)) for k, v in data["effective"].items()],
        *[(f"caller.{k}", json.dumps(v)) for k, v in data["caller"].items()],
        ("system prompt", data["system_prompt_digest"] or "none"),
        ("prompt cache", f"ttl {data['prompt_cache']}" if data["prompt_cache"] else "off"),
        *_tool_rows(data["tools"]),
        ("attachments.images", _limits_text(attachments["images"])),
        ("attachments.documents", _limits_text(attachments["documents"])),
        (
            "caller cache_control",
            "allowed" if attachments["caller_cache_control"] else "refused",
        ),
        ("output schema", data["output_schema_digest"] or "none"),
        ("fingerprint", data["fingerprint"]),
    ]
