"""What an answer says about itself, recorded with it and checked against the policy.

    facts = answer_facts(plan, response)          # merged into the RESPONSE event's data
    alerts = answer_alerts(plan, response)        # each one an ANSWER_ALERT event

The request the gateway recorded is not always what answered it. The API may answer with
another model than the one asked for (server-side fallbacks, which the planner refuses to
ask for), run inference somewhere other than the policy pinned (``inference_geo``), change
what the model saw (context editing, compaction), or bill reasoning it does not return
(thinking with ``display: "omitted"``). So each answer's own evidence is recorded:

- ``service_tier`` and ``inference_geo`` as its ``usage`` reports them;
- ``thinking``: how many thinking blocks came back with their reasoning (``shown``), how many
  with only a signature (``omitted``) or encrypted (``redacted``), the display the request
  asked for, and so whether a reviewer can read the reasoning (``auditable``);
- ``context_management`` (the edits the server applied) and ``compaction`` blocks, when any.

A check that fails is an alert, never a refusal: the answer came and was billed, so it is
recorded and returned, and the alert says what differs from the policy (``check``, what was
``expected``, what was ``reported``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.policy import Plan
from gateway.providers.registry import capabilities

__all__ = ["answer_alerts", "answer_facts"]

_THINKING = ("thinking", "redacted_thinking")


def answer_facts(plan: Plan, response: Mapping[str, Any]) -> dict[str, Any]:
    """The RESPONSE data fields this answer adds; only those it reports (an answer without
    thinking, tiers or server edits records what it always did)."""
    facts: dict[str, Any] = {}
    usage = response.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    for key in ("service_tier", "inference_geo"):
        if isinstance(usage.get(key), str):
            facts[key] = usage[key]
    blocks = [b for b in response.get("content") or () if isinstance(b, Mapping)]
    thinking = _thinking(plan, blocks)
    if thinking is not None:
        facts["thinking"] = thinking
    edits = _applied_edits(response)
    if edits is not None:
        facts["context_management"] = {"applied_edits": edits}
    compactions = sum(1 for b in blocks if b.get("type") == "compaction")
    if compactions:
        facts["compaction"] = {"blocks": compactions}
    return facts


def answer_alerts(plan: Plan, response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What in the answer differs from what the policy pinned, one dict per check."""
    alerts: list[dict[str, Any]] = []
    provider = capabilities(plan.provider)
    answered = response.get("model")
    echoed = provider.echoed_model(plan.model_id)
    if echoed is not None and answered != echoed:
        alerts.append(
            {
                "check": "model",
                "expected": echoed,
                "reported": answered if isinstance(answered, str) else None,
                "reason": "the answer names another model than the pinned one",
            }
        )
    geo = plan.body.get("inference_geo")
    if geo is not None and provider.inference_geo:
        usage = response.get("usage")
        reported = usage.get("inference_geo") if isinstance(usage, Mapping) else None
        if reported != geo:
            alerts.append(
                {
                    "check": "inference_geo",
                    "expected": geo,
                    "reported": reported if isinstance(reported, str) else None,
                    "reason": "the answer does not report inference where the policy pins it"
                    if reported is None
                    else "the answer reports inference elsewhere than the policy pins it",
                }
            )
    # Edits the request asked for (a caller's, where the policy opens context_management)
    # are expected; any other edit the server applied is not.
    asked = _asked_edits(plan)
    edits = [e for e in _applied_edits(response) or () if _edit_type(e) not in asked]
    if edits:
        alerts.append(
            {
                "check": "context_management",
                "expected": sorted(asked),
                "reported": [e.get("type") for e in edits if isinstance(e, Mapping)],
                "reason": "the server edited the context the model read, which the policy "
                "does not allow",
            }
        )
    return alerts


def _thinking(plan: Plan, blocks: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    asked = plan.body.get("thinking")
    asked = asked if isinstance(asked, Mapping) else {}
    found = [b for b in blocks if b.get("type") in _THINKING]
    if not found and asked.get("type") in (None, "disabled"):
        return None
    shown = sum(1 for b in found if b.get("type") == "thinking" and _has_text(b))
    redacted = sum(1 for b in found if b.get("type") == "redacted_thinking")
    omitted = len(found) - shown - redacted
    display = asked.get("display")
    return {
        "requested_display": display if isinstance(display, str) else "default",
        "blocks": len(found),
        "shown": shown,
        "omitted": omitted,
        "redacted": redacted,
        # A reviewer can read the reasoning only when every thinking block carries it.
        "auditable": bool(found) and shown == len(found),
    }


def _has_text(block: Mapping[str, Any]) -> bool:
    text = block.get("thinking")
    return isinstance(text, str) and bool(text.strip())


def _edit_type(edit: object) -> object:
    return edit.get("type") if isinstance(edit, Mapping) else None


def _asked_edits(plan: Plan) -> set[str]:
    managed = plan.body.get("context_management")
    edits = managed.get("edits") if isinstance(managed, Mapping) else None
    return {str(_edit_type(e)) for e in edits or () if isinstance(_edit_type(e), str)}


def _applied_edits(response: Mapping[str, Any]) -> list[Any] | None:
    managed = response.get("context_management")
    if not isinstance(managed, Mapping):
        return None
    edits = managed.get("applied_edits")
    return list(edits) if isinstance(edits, list) else None
