"""What `gateway policy show TASK` prints: the effective settings of one task, as data (the
JSON form) and as the SETTING / VALUE rows of the text form (the policy's field table).

    shown = shown_policy(policy, catalog, today)
    data = show_data(shown)                            # JSON-ready
    rows = field_rows(shown)                           # the text form: gateway.policy
"""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel

from audit.canonical import canonical_digest, digest
from gateway.catalog import Catalog
from gateway.errors import PolicyLoadError
from gateway.policy import (
    PLACEHOLDER_INPUT,
    Policy,
    Shown,
    broad_grant,
    caller_grants,
    contract_kind,
)


def contract_json(policy: Policy) -> dict[str, Any]:
    """The caller contract as review and show print it in JSON: strict or opened, whether it
    is a broad grant, and what a caller may do, in sentences."""
    return {
        "kind": contract_kind(policy),
        "broad_grant": broad_grant(policy),
        "grants": caller_grants(policy),
    }


def signoff_fields(data: Any, today: date) -> dict[str, Any]:
    """The sign-off fields of a Policy (loaded or as written), JSON-ready; ``in_effect`` is whether
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


def _tools(policy: Policy) -> dict[str, Any] | None:
    tools = policy.tools
    if tools.definitions is None and not tools.server:
        return None
    names = [t.get("name") for t in tools.definitions or () if isinstance(t.get("name"), str)]
    return {
        "file": tools.file,
        "names": names,
        "choice": tools.choice,
        "server": list(tools.server),
    }


def _limits(limits: BaseModel | None) -> dict[str, Any] | None:
    return limits.model_dump(mode="json") if limits is not None else None


def shown_policy(policy: Policy, catalog: Catalog, today: date) -> Shown:
    """``policy`` with its model and request template; ``today`` the day its effective date
    is judged on (the policy set's)."""
    model = catalog.get(policy.model.id)
    if model is None:  # review refuses this; only a catalog override changed under us
        raise PolicyLoadError(f"model {policy.model.id!r} is not in the catalog.")
    return Shown.of(policy, model, today=today)


def show_data(shown: Shown) -> dict[str, Any]:
    """The JSON form: the policy's effective settings and exact request template."""
    policy, plan = shown.policy, shown.plan
    prompt, schema = policy.prompt.system, policy.output.json_schema
    return {
        "task": policy.task,
        "description": policy.description,
        **signoff_fields(policy, shown.today),
        "reproducible": policy.reproducible,
        "model_id": policy.model.id,
        "provider": plan.provider,
        "api_version": plan.api_version,
        # Where the requests go: the transport (None: Anthropic's API), the id there, region.
        "transport": {
            "name": policy.model.transport,
            "model_id": plan.model_id,
            "region": policy.model.region,
        },
        "cache_mode": policy.cache.mode,
        "output_format": policy.output.format,
        "stream": policy.output.stream,
        "effective": plan.effective,
        "caller": policy.caller.model_dump(mode="json", exclude_none=True),
        "caller_contract": contract_json(policy),
        "system_prompt_digest": digest(prompt.encode()) if prompt is not None else None,
        "prompt_cache": policy.prompt.cache,
        "tools": _tools(policy),
        "attachments": {
            "images": _limits(policy.input.images),
            "documents": _limits(policy.input.documents),
            "caller_cache_control": policy.input.cache_control,
        },
        "output_schema_digest": canonical_digest(schema) if schema is not None else None,
        "fingerprint": policy.fingerprint,
        "request_template": {"api_version": plan.api_version, "body": plan.body},
        "placeholder_input": PLACEHOLDER_INPUT,
    }
