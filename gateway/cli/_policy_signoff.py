"""The sign-off parts of `gateway policy review` and `show`: approvals read from the audit
database, rendered as text and JSON, and the sign-off table (owner, risk tier, effective date,
regulations, approvals) with what did not count and whether approver keys are pinned."""

from __future__ import annotations

from datetime import date
from typing import Any

import click

from audit.store import missing_database
from gateway.cli._policy_show import effective_text, signoff_fields
from gateway.cli._render import shown, text_table
from gateway.errors import AuditError
from gateway.evidence import ApprovalStatus, Auditing
from gateway.policy import PolicyEntry, PolicySet
from gateway.settings import Settings


def read_approvals(
    settings: Settings, policies: PolicySet, tasks: list[str] | None = None
) -> dict[str, ApprovalStatus] | None:
    """Approvals from the audit database, or None when there is none to read (a SQLite file
    that does not exist); a database that cannot be read is said on stderr."""
    if missing_database(settings.database_url) is not None:
        return None
    try:
        with Auditing.open(settings) as auditing:
            return auditing.approvals(policies, tasks)
    except AuditError as exc:
        click.echo(f"approvals not shown: {exc}", err=True)
        return None


def approval_text(status: ApprovalStatus | None, required: int) -> str:
    if status is None:
        return "-"
    count = len(status.approvers)
    names = f" ({', '.join(status.approvers)})" if status.approvers else ""
    if required:
        verdict = "ok" if count >= required else "MISSING"
        return f"{count} of {required}{names} {verdict}"
    return f"{count}{names}" if count else "none"


def approval_json(status: ApprovalStatus | None, required: int) -> dict[str, Any] | None:
    if status is None:
        return None
    return {
        "fingerprint": status.fingerprint,
        "approvers": list(status.approvers),
        "seqs": list(status.seqs),
        "required": required,
        "enough": status.enough(required),
        "not_counted": list(status.rejected),
        "pinned": status.pinned,
    }


def echo_signoff(
    entries: tuple[PolicyEntry, ...] | list[PolicyEntry],
    approvals: dict[str, ApprovalStatus] | None,
    required: int,
    today: date,
) -> None:
    rows = []
    not_yet = []
    for e in entries:
        if e.data is None:
            continue
        s = signoff_fields(e.data, today)
        if not s["in_effect"]:
            not_yet.append(f"{e.task} on {s['effective_date']}")
        approved = (
            approval_text(approvals.get(e.task), required)
            if approvals is not None
            else "no audit database"
        )
        rows.append(
            [
                e.task,
                s["owner"],
                s["risk_tier"] or "-",
                effective_text(s),
                "; ".join(s["regulations"]) or "-",
                approved,
            ]
        )
    if rows:
        headers = ["TASK", "OWNER", "RISK TIER", "EFFECTIVE", "REGULATIONS", "APPROVALS"]
        click.echo("Sign-off:")
        click.echo(text_table(headers, rows))
        for task, status in (approvals or {}).items():
            for line in status.rejected:
                click.echo(f"  {shown(task)}: not counted: {shown(line)}")
        if not_yet:
            click.echo(
                f"Not yet in effect (today is {today}, UTC): {', '.join(not_yet)}; the gateway "
                "refuses their requests until then."
            )
        if approvals:
            pinned = next(iter(approvals.values())).pinned
            click.echo(
                "Approver keys: pinned (only each approver's registered key counts)."
                if pinned
                else "Approver keys: not pinned (GATEWAY_TRUSTED_APPROVERS_FILE unset): any "
                "key under any name counts."
            )
        click.echo("")
