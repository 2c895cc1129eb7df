"""The one table of what a reviewer is shown about a policy: each setting's label, where it
lives in the policy, and how it reads. `gateway policy show` prints it as SETTING / VALUE
rows; the sign-off sheet prints the same rows in its Sign-off and What sections.

    shown = Shown.of(policy, model, today=date.today())
    for label, text in field_rows(shown):
        print(label, text)

A new policy setting is one row here. Tools, attachments and prompt caching read as what the
policy allows, with what it refuses said as plainly ("refused"), because a reviewer signs off
on both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from operator import attrgetter
from typing import Any, Literal

from audit.canonical import canonical_digest, digest
from gateway.catalog import ModelInfo
from gateway.policy._contract_text import caller_grants, contract_kind
from gateway.policy._plan import Plan, plan_request
from gateway.policy._retention import RetentionTable
from gateway.policy._schema import AttachmentLimits, Policy, ToolsTable

PLACEHOLDER_INPUT = "<user input>"

Section = Literal["signoff", "settings"]
Rows = list[tuple[str, str]]


@dataclass(frozen=True)
class Shown:
    """A policy as a reviewer sees it: with its model, the exact request it makes of a
    placeholder input, and the day its effective date is judged on."""

    policy: Policy
    model: ModelInfo
    plan: Plan
    today: date
    day_named: str = ""  # how the text names ``today`` (a sheet: " on this sheet's date")

    @classmethod
    def of(cls, policy: Policy, model: ModelInfo, *, today: date, day_named: str = "") -> Shown:
        """``model`` is the catalog's; the request is planned as it goes over the policy's
        transport (its id, API version and body there)."""
        try:
            reached = model.on_transport(policy.model.transport, policy.model.transport_id)
        except KeyError:  # review refuses this policy; show the catalog's request instead
            reached = model
        plan = plan_request(policy, reached, [{"role": "user", "content": PLACEHOLDER_INPUT}])
        return cls(policy, model, plan, today, day_named)


@dataclass(frozen=True)
class PolicyField:
    label: str
    where: str  # the attribute path in Policy
    section: Section
    # The value's text, or the rows it reads as (labelled by the renderer).
    render: Callable[[Any, Shown], str | Rows]


def effective_date_text(when: date | None, today: date, day_named: str = "") -> str:
    if when is None:
        return "-"
    if when > today:
        return f"{when} (not yet in effect{day_named}: the gateway refuses its requests until then)"
    return when.isoformat()


def _model(model_id: str, s: Shown) -> str:
    return f"{model_id} ({s.plan.provider}, anthropic-version {s.plan.api_version})"


def _transport(transport: str | None, s: Shown) -> str:
    if transport is None:
        return "anthropic (Anthropic's API)"
    return f"{transport}: model id {s.plan.model_id}, region {s.policy.model.region or '-'}"


def _lifecycle(_: str, s: Shown) -> str:
    retires = s.model.retires_at
    return s.model.lifecycle + (f", retires {retires.isoformat()}" if retires else "")


def _json_rows(prefix: str, values: dict[str, Any]) -> Rows:
    return [(f"{prefix}.{key}", json.dumps(value)) for key, value in values.items()]


def _tools(tools: ToolsTable, _: Shown) -> str | Rows:
    if tools.definitions is None and not tools.server:
        return "none"
    names = [str(t["name"]) for t in tools.definitions or () if isinstance(t.get("name"), str)]
    return [
        ("tools.file", tools.file or "-"),
        ("tools.names", ", ".join(names) or "-"),
        ("tools.choice", tools.choice or "-"),
        ("tools.server", ", ".join(tools.server) or "none allowed"),
    ]


def _limits(limits: AttachmentLimits | None, _: Shown) -> str:
    if limits is None:
        return "refused"
    urls = "URL sources allowed" if limits.url else "base64 only (URL sources refused)"
    return f"up to {limits.max_count} per request, {limits.max_bytes:,} bytes each; {urls}"


def _retention(table: RetentionTable, _: Shown) -> str:
    kept = "for the log's life" if table.content_days is None else f"{table.content_days} days"
    named = f"{table.name}: " if table.name else ""
    limit = f" (data-protection maximum {table.max_days} days)" if table.max_days else ""
    return f"{named}content {kept}{limit}; metadata for the log's life"


def _or(empty: str) -> Callable[[Any, Shown], str]:
    return lambda value, _: str(value) if value else empty


def _yes_no(yes: str, no: str) -> Callable[[Any, Shown], str]:
    return lambda value, _: yes if value else no


FIELDS: tuple[PolicyField, ...] = (
    PolicyField("task", "task", "signoff", _or("-")),
    PolicyField("description", "description", "signoff", _or("-")),
    PolicyField("owner", "owner", "signoff", _or("-")),
    PolicyField("risk tier", "risk_tier", "signoff", _or("-")),
    PolicyField(
        "effective date",
        "effective_date",
        "signoff",
        lambda v, s: effective_date_text(v, s.today, s.day_named),
    ),
    PolicyField("regulations", "regulations", "signoff", lambda v, _: "; ".join(v) or "-"),
    PolicyField("policy file", "source", "signoff", _or("-")),
    PolicyField("model", "model.id", "settings", _model),
    PolicyField("transport", "model.transport", "settings", _transport),
    PolicyField("model lifecycle", "model.id", "settings", _lifecycle),
    PolicyField(
        "model choices", "model.choices", "settings", lambda v, _: ", ".join(v or ()) or "none"
    ),
    PolicyField("reproducible", "reproducible", "settings", _yes_no("yes", "no")),
    PolicyField("cache mode", "cache.mode", "settings", _or("-")),
    PolicyField("retention", "retention", "settings", _retention),
    PolicyField("output", "output.format", "settings", _or("-")),
    PolicyField("stream", "output.stream", "settings", _or("-")),
    PolicyField("verdict pattern", "output.verdict", "settings", _or("-")),
    PolicyField(
        "generation",
        "generation",
        "settings",
        lambda _, s: _json_rows("generation", s.plan.effective),
    ),
    PolicyField(
        "caller",
        "caller",
        "settings",
        lambda v, _: _json_rows("caller", v.model_dump(mode="json", exclude_none=True)),
    ),
    PolicyField("caller contract", "caller", "settings", lambda _, s: contract_kind(s.policy)),
    PolicyField(
        "caller may",
        "caller",
        "settings",
        lambda _, s: [("caller may", sentence) for sentence in caller_grants(s.policy)],
    ),
    PolicyField(
        "system prompt",
        "prompt.system",
        "settings",
        lambda v, _: digest(v.encode()) if v else "none",
    ),
    PolicyField(
        "prompt cache", "prompt.cache", "settings", lambda v, _: f"ttl {v}" if v else "off"
    ),
    PolicyField("tools", "tools", "settings", _tools),
    PolicyField("attachments.images", "input.images", "settings", _limits),
    PolicyField("attachments.documents", "input.documents", "settings", _limits),
    PolicyField(
        "caller cache_control", "input.cache_control", "settings", _yes_no("allowed", "refused")
    ),
    PolicyField(
        "output schema",
        "output.json_schema",
        "settings",
        lambda v, _: canonical_digest(v) if v is not None else "none",
    ),
    PolicyField("fingerprint", "fingerprint", "settings", _or("-")),
)


def field_rows(shown: Shown, section: Section | None = None) -> Rows:
    """The (label, text) rows of ``FIELDS`` (of one section), in table order."""
    rows: Rows = []
    for field in FIELDS:
        if section is not None and field.section != section:
            continue
        text = field.render(attrgetter(field.where)(shown.policy), shown)
        rows.extend([(field.label, text)] if isinstance(text, str) else text)
    return rows
