"""`gateway policy history TASK` and `gateway policy show --fingerprint FP`: policy versions
read from the audit log, not from the folder.

    $ gateway policy history compliance_review            # each version, its dates, approvals
    $ gateway policy show --fingerprint sha256:4f2a...    # a stored version, as it was recorded
"""

from __future__ import annotations

import json
from datetime import datetime

import click

from gateway.catalog import Catalog
from gateway.cli._context import settings_of
from gateway.cli._policy_show import show_data, shown_policy
from gateway.cli._policy_versions import approvals_text, version_json, when
from gateway.cli._render import echo_json, shown, shown_lines, text_table
from gateway.errors import PolicyLoadError
from gateway.evidence import PolicyRecords, PolicyVersion
from gateway.policy import field_rows

__all__ = ["history_command", "show_stored"]


@click.command("history")
@click.argument("task")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def history_command(ctx: click.Context, task: str, fmt: str) -> None:
    """Each version of TASK the audit log holds, oldest first: its fingerprint, when it was
    first and last used (UTC) and by how many requests, who approved it and when, and what
    changed from the version before (the field changes and a diff of prompt, schema, tools).
    Only approvals that count are listed as approvals; the others are named apart."""
    with PolicyRecords.open(settings_of(ctx)) as records:
        versions = records.history(task)
    if fmt == "json":
        echo_json({"task": task, "versions": [version_json(v) for v in versions]})
        return
    rows = [
        [v.fingerprint, when(v.first_used), when(v.last_used), v.requests, approvals_text(v)]
        for v in versions
    ]
    click.echo(text_table(["VERSION", "FIRST USED", "LAST USED", "REQUESTS", "APPROVED BY"], rows))
    for n, v in enumerate(versions):
        for line in v.not_counted:
            click.echo(f"  {shown(v.fingerprint[:19])}: not counted: {shown(line)}")
        if n == 0:
            continue
        click.echo("")
        click.echo(f"{shown(v.fingerprint)} changes from {shown(versions[n - 1].fingerprint)}:")
        _echo_changes(v)


def _echo_changes(v: PolicyVersion) -> None:
    if not v.stored:
        click.echo("    (its content is not stored in the log)")
    elif v.diff is None:
        click.echo("    (not comparable: one side is not a task policy)")
    elif not v.diff.changes:
        click.echo("    no field changed")
    else:
        for c in v.diff.changes:
            click.echo(f"    {shown(c.key)}: {json.dumps(c.old)} -> {json.dumps(c.new)}")
            if c.risk:
                click.echo(f"        risk: {shown(c.risk)}")
        for text in v.diff.text_diffs:
            click.echo(f"    {shown(text.key)} (unified diff):")
            for line in text.lines:
                click.echo(f"        {shown(line)}")


def show_stored(ctx: click.Context, fingerprint: str, fmt: str) -> None:
    """`policy show --fingerprint FP`: the version the log stored, as `policy show` prints a
    folder's (JSON: the stored content itself, exactly)."""
    settings = settings_of(ctx)
    with PolicyRecords.open(settings) as records:
        content = records.content(fingerprint)
        policy = records.policy(fingerprint) if fmt == "text" else None
    if policy is None:
        echo_json({"fingerprint": fingerprint, "content": content})
        return
    click.echo(f"stored version {shown(fingerprint)} of task {shown(policy.task)}")
    try:
        catalog = Catalog.load(settings.catalog_override)
        view = shown_policy(policy, catalog, datetime.now().date())
    except PolicyLoadError as exc:  # its model has left the catalog: the content, whole
        click.echo(f"({exc.message} The stored content follows.)")
        click.echo(shown_lines(json.dumps(content, indent=2, ensure_ascii=False)))
        return
    click.echo(text_table(["SETTING", "VALUE"], field_rows(view)))
    click.echo("")
    body = json.dumps(show_data(view)["request_template"]["body"], indent=2, ensure_ascii=False)
    click.echo("Request template:")
    click.echo(shown_lines(body))
