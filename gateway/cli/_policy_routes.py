"""The routing table in `gateway policy review`: each route in words, its fingerprint and
its approvals (signed as the task "routes")."""

from __future__ import annotations

from typing import Any

import click

from gateway.cli._policy_signoff import approval_json, approval_text
from gateway.cli._render import shown, text_table
from gateway.evidence import ApprovalStatus
from gateway.policy import ANY, ROUTES_FILE, ROUTES_TASK, PolicySet


def echo_routes(
    policies: PolicySet, approvals: dict[str, ApprovalStatus] | None, required: int
) -> None:
    table = policies.routes
    if table is None:
        if policies.route_findings:
            click.echo(f"Routes: {ROUTES_FILE} does not load (see its findings): no model id "
                       "is routed; requests must name a task.")  # fmt: skip
            click.echo("")
        return
    approved = approval_text((approvals or {}).get(ROUTES_TASK), required)
    click.echo(f"Routes ({ROUTES_FILE}, {shown(table.fingerprint)}; approvals: {approved}):")
    rows = [
        [
            "any caller" if r.caller == ANY else shown(r.caller),
            "any current Claude model" if r.model == ANY else shown(r.model),
            shown(r.task),
            _answered_by(policies, r.task, r.model),
        ]
        for r in sorted(table.routes, key=lambda r: r.specificity, reverse=True)
    ]
    click.echo(text_table(["CALLER", "ASKING FOR", "TASK", "ANSWERED BY"], rows))
    click.echo("The most specific route answers: a named caller first, then a named model.")
    click.echo("")


def _answered_by(policies: PolicySet, task: str, model: str) -> str:
    entry = policies.entry(task)
    if entry is None or entry.policy is None:
        return "refused (the task does not load)"
    allowed = entry.policy.model.allowed
    if model == ANY:
        if len(allowed) == 1:
            return allowed[0]
        return f"{', '.join(allowed[1:])} when asked for, else {allowed[0]}"
    return model if model in allowed else f"{allowed[0]} (not {model})"


def routes_json(
    policies: PolicySet, approvals: dict[str, ApprovalStatus] | None, required: int
) -> dict[str, Any] | None:
    table = policies.routes
    if table is None:
        return None
    return {
        "file": ROUTES_FILE,
        "fingerprint": table.fingerprint,
        "routes": [r.model_dump() for r in table.routes],
        "approvals": approval_json((approvals or {}).get(ROUTES_TASK), required)
        if approvals is not None
        else None,
    }
