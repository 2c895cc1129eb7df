"""`gateway audit purge|erase|hold|release|holds`: retention, legal hold and erasure.

    $ gateway audit purge --dry-run                       # what retention would erase now
    $ gateway audit purge --actor ops-scheduler           # erase it (idempotent, resumable)
    $ gateway audit erase --request req_... --reason "DSAR 2026-118" --approver dpo.k.lee
    $ gateway audit hold --task kyc --since 2026-01-01 --reason "Case 12-cv-881"
    $ gateway audit release hold_... --reason "case closed"
    $ gateway audit holds --format json

Parse, call the facade (gateway.evidence.Erasing), render; refusals are one line each.
"""

from __future__ import annotations

import getpass
from datetime import datetime

import click

from gateway.cli._context import settings_of
from gateway.cli._render import echo_json, parse_when, shown
from gateway.evidence import Erasing, HoldScope, PurgeReport

__all__ = ["attach"]

_ACTOR = click.option(
    "--actor",
    default=None,
    help="Who runs this (recorded in the event); default: the operating-system user.",
)
_FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")


def _actor(value: str | None) -> str:
    return value or getpass.getuser()


@click.command("purge")
@click.option("--dry-run", is_flag=True, help="Say what would be erased; erase nothing.")
@_ACTOR
@_FORMAT
@click.pass_context
def purge_command(ctx: click.Context, dry_run: bool, actor: str | None, fmt: str) -> None:
    """Erase the content whose retention class has run out and that no legal hold or
    regulatory minimum keeps (one erasure event per request). Safe from a scheduler: a run
    again erases nothing twice and completes what a killed run began."""
    with Erasing.open(settings_of(ctx)) as erasing:
        report = erasing.purge(actor=_actor(actor), dry_run=dry_run)
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
        return
    _print_purge(report)


def _print_purge(report: PurgeReport) -> None:
    verb = "would erase" if report.dry_run else "erased"
    click.echo(f"{'task':<24} {'class':<16} {verb:>12} {'held':>6} {'minimum':>8}")
    for row in report.rows:
        click.echo(
            f"{shown(row.task):<24} {shown(row.retention_class):<16} {row.erased:>12} "
            f"{row.held:>6} {row.under_minimum:>8}"
        )
        for reason in row.reasons:
            click.echo(f"    kept: {shown(reason)}")
    click.echo(
        f"{verb} the content of {report.requests_erased} request(s): "
        f"{report.payloads_removed} payload(s) removed, {report.payloads_kept} kept "
        "(still named by a request that is kept)"
        + (
            f"; completed {report.resumed_events} interrupted erasure(s)"
            if report.resumed_events
            else ""
        )
    )


@click.command("erase")
@click.option("--request", "requests", multiple=True, help="A request id (repeat).")
@click.option(
    "--subject",
    help="A data subject's id: every request made with it (recorded as a keyed digest only).",
)
@click.option(
    "--rule",
    type=click.Choice(["subject_request", "other"]),
    default="subject_request",
    show_default=True,
    help="Why: a data subject's request, or another rule named in --reason.",
)
@click.option("--reason", required=True, help="The request's reference, recorded.")
@click.option("--approver", required=True, help="Who approved the erasure, recorded.")
@_ACTOR
@_FORMAT
@click.pass_context
def erase_command(
    ctx: click.Context,
    requests: tuple[str, ...],
    subject: str | None,
    rule: str,
    reason: str,
    approver: str,
    actor: str | None,
    fmt: str,
) -> None:
    """Erase the content of the given requests, or of every request about a data subject
    (--subject), now. Refused as a whole, naming why, when any is under a legal hold or a
    regulatory minimum period."""
    if (subject is None) == (not requests):
        raise click.UsageError("give --request (repeatable) or --subject, not both.")
    with Erasing.open(settings_of(ctx)) as erasing:
        if subject is not None:
            report = erasing.erase_subject(
                subject, reason=reason, actor=_actor(actor), approver=approver
            )
        else:
            report = erasing.erase(
                requests, rule=rule, reason=reason, actor=_actor(actor), approver=approver
            )
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
        return
    for request_id, seq in sorted(report.erased.items()):
        click.echo(f"erased {shown(request_id)} (event seq {seq})")
    for request_id, seq in sorted(report.already.items()):
        click.echo(f"{shown(request_id)} was already erased (event seq {seq})")
    click.echo(
        f"{report.payloads_removed} payload(s) removed, {report.payloads_kept} kept "
        "(still named by a request that is kept)"
    )
    for key_id, count in sorted(report.unsearched.items()):
        click.echo(
            f"warning: {count} request(s) carry subject tags made under cache key {key_id}, "
            "which the key ring does not hold, and were not searched "
            "(GATEWAY_PREVIOUS_CACHE_KEYS_FILE)",
            err=True,
        )


@click.command("hold")
@click.option("--task")
@click.option("--caller")
@click.option("--request", "request_id")
@click.option("--since", callback=parse_when, help="From this UTC time (ISO 8601).")
@click.option("--until", callback=parse_when, help="Before this UTC time (ISO 8601).")
@click.option("--subject", help="A data subject's id (the scope records its keyed digest).")
@click.option("--reason", required=True, help="The matter the hold is for, recorded.")
@_ACTOR
@click.pass_context
def hold_command(
    ctx: click.Context,
    task: str | None,
    caller: str | None,
    request_id: str | None,
    since: datetime | None,
    until: datetime | None,
    subject: str | None,
    reason: str,
    actor: str | None,
) -> None:
    """Place a legal hold: content in its scope is never erased until it is released."""
    with Erasing.open(settings_of(ctx)) as erasing:
        # The current cache key's tag, and those under the ring's earlier keys.
        tags = erasing.subject_tags(subject) if subject is not None else []
        scope = HoldScope(
            task=task,
            caller=caller,
            request_id=request_id,
            since=since,
            until=until,
            subject=tags[0] if tags else None,
            subject_tags=tuple(tags[1:]) or None,
        )
        hold = erasing.hold(scope, reason=reason, actor=_actor(actor))
    click.echo(f"legal hold {hold.hold_id} placed (event seq {hold.seq}): {shown(scope.text())}")


@click.command("release")
@click.argument("hold_id")
@click.option("--reason", required=True)
@_ACTOR
@click.pass_context
def release_command(ctx: click.Context, hold_id: str, reason: str, actor: str | None) -> None:
    """Release a legal hold (recorded); its content is then subject to retention again."""
    with Erasing.open(settings_of(ctx)) as erasing:
        seq = erasing.release(hold_id, reason=reason, actor=_actor(actor))
    click.echo(f"legal hold {shown(hold_id)} released (event seq {seq})")


@click.command("holds")
@_FORMAT
@click.pass_context
def holds_command(ctx: click.Context, fmt: str) -> None:
    """The legal holds in force."""
    with Erasing.open(settings_of(ctx)) as erasing:
        holds = erasing.holds()
    if fmt == "json":
        echo_json(
            [
                {
                    "hold_id": h.hold_id,
                    "seq": h.seq,
                    "scope": h.scope.model_dump(mode="json", exclude_none=True),
                    "reason": h.reason,
                    "actor": h.actor,
                }
                for h in holds
            ]
        )
        return
    for h in holds:
        click.echo(f"{h.hold_id}  seq {h.seq}  {shown(h.scope.text())}  {shown(h.reason)}")
    click.echo(f"{len(holds)} legal hold(s) in force")


def attach(audit_group: click.Group) -> None:
    for command in (purge_command, erase_command, hold_command, release_command, holds_command):
        audit_group.add_command(command)
