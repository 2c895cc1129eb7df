"""GET /v1/models: each task, and each real model id a caller's routes admit, as the Models
API describes a model, so that clients sizing requests from it size them right.

    entries = listed_models(state.policies, state.catalog, key, created_at)   # id -> entry

An entry says what a caller may do through the gateway, not what the model could do alone:
``max_tokens`` is the largest ``max_tokens`` the policy lets the caller ask for, and each
capability is "supported" only when the policy opens it to callers (thinking types and
effort levels it may choose, its own output schema, server tools, context edits, images,
PDFs). The gateway's own facts sit under ``gateway`` (task, answering model, contract kind,
whose tools, policy fingerprint); SDKs ignore keys they do not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.callers import CallerKey
from gateway.catalog import Catalog, ModelInfo
from gateway.policy import ANY, Policy, PolicySet, contract_kind

__all__ = ["listed_models"]

_THINKING_TYPES = ("adaptive", "between_tools", "disabled", "enabled")
_EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")
_CONTEXT_EDITS = ("clear_thinking_20251015", "clear_tool_uses_20250919", "compact_20260112")


def listed_models(
    policies: PolicySet, catalog: Catalog, key: CallerKey, created_at: str
) -> dict[str, dict[str, Any]]:
    """Every id this caller may send as ``model``, in id order: the tasks that load, then
    the model ids its routes admit (the most specific route for each)."""
    entries: dict[str, dict[str, Any]] = {}
    for policy in policies.policies():
        model = catalog.get(policy.model.id)
        if model is not None:
            entries[policy.task] = _entry(policy.task, policy, model, created_at)
    table = policies.routes
    if table is not None:
        asked = {r.model for r in table.routes_for(key.caller) if r.model != ANY}
        if any(r.model == ANY for r in table.routes_for(key.caller)):
            asked |= table.current_models
        for model_id in sorted(asked - set(entries)):
            route = table.route(key.caller, model_id)
            entry = policies.entry(route.task) if route is not None else None
            routed = entry.policy if entry is not None else None
            if routed is None:
                continue  # a route to a task that does not load answers nothing
            answering = model_id if model_id in routed.model.allowed else routed.model.id
            model = catalog.get(answering)
            if model is not None:
                entries[model_id] = _entry(model_id, routed, model, created_at)
    return dict(sorted(entries.items()))


def _entry(entry_id: str, policy: Policy, model: ModelInfo, created_at: str) -> dict[str, Any]:
    opened = policy.caller.model_dump(mode="json", exclude_none=True)
    shown = entry_id if entry_id == policy.task else f"{entry_id} (task {policy.task})"
    retires = model.retires_at.isoformat() + "T00:00:00Z" if model.retires_at else None
    return {
        "type": "model",
        "id": entry_id,
        "display_name": shown,
        "created_at": created_at,
        "lifecycle": model.lifecycle,
        "deprecated_at": None if model.lifecycle == "active" else created_at,
        "retires_at": retires,
        "max_input_tokens": model.context_window,
        "max_tokens": _max_tokens(policy, model),
        "line": None,
        "capabilities": _capabilities(policy, model, opened),
        "gateway": {
            "task": policy.task,
            "model": model.id,
            "contract": contract_kind(policy),
            # Whose tools a request may carry: the caller's own, the policy's, or none.
            "tools": "caller"
            if "tools" in opened
            else "policy"
            if policy.tools.definitions
            else "none",
            "fingerprint": policy.fingerprint,
        },
    }


def _max_tokens(policy: Policy, model: ModelInfo) -> int:
    """The largest max_tokens a caller may send and have honoured: the top of its range when
    the policy opens max_tokens, else the policy's own value (a larger one is met by it)."""
    bound = policy.caller.max_tokens
    if bound is not None and bound.max is not None:
        return min(int(bound.max), model.max_output_tokens)
    return policy.generation.max_tokens or model.max_output_tokens


def _support(flag: bool) -> dict[str, bool]:
    return {"supported": flag}


def _allowed(opened: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = opened.get(key)
    allowed = value.get("allowed") if isinstance(value, Mapping) else None
    return tuple(a for a in allowed if isinstance(a, str)) if isinstance(allowed, list) else ()


def _capabilities(policy: Policy, model: ModelInfo, opened: Mapping[str, Any]) -> dict[str, Any]:
    thinking = set(_allowed(opened, "thinking")) & set(model.thinking_types)
    effort = set(_allowed(opened, "effort")) & set(model.effort_levels)
    edits = set(_allowed(opened, "context_management"))
    tools = opened.get("tools")
    server = tools.get("server", []) if isinstance(tools, Mapping) else []
    server_types = [s for s in server if isinstance(s, str)]
    web_search = any(s.startswith("web_search") for s in server_types)
    code_execution = any(s.startswith("code_execution") for s in server_types)
    output = opened.get("output")
    schema = isinstance(output, Mapping) and output.get("schema") is True
    return {
        "batch": _support(False),  # the gateway serves messages one by one
        "citations": _support(False),
        "code_execution": _support(False),
        "context_management": {
            "supported": bool(edits),
            **{edit: _support(edit in edits) for edit in _CONTEXT_EDITS},
        },
        "effort": {
            "supported": bool(effort),
            **{level: _support(level in effort) for level in _EFFORT_LEVELS},
        },
        "image_input": _support(policy.input.images is not None),
        "pdf_input": _support(policy.input.documents is not None),
        "server_tools": {
            "supported": web_search or code_execution,
            "code_execution": _support(code_execution),
            "web_search": _support(web_search),
        },
        "structured_outputs": _support(schema and model.structured_outputs),
        "thinking": {
            "supported": bool(thinking - {"disabled"}),
            "types": {kind: _support(kind in thinking) for kind in _THINKING_TYPES},
        },
    }
