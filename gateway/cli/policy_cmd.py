"""`gateway policy`: review, show, compare and approve policy files.

    $ gateway policy review policies/
    $ gateway policy show compliance_review --format json
    $ gateway policy diff old/ policies/
    $ gateway policy approve compliance_review --approver j.smith     # GATEWAY_APPROVER_KEY

The policy folder defaults to GATEWAY_POLICY_DIR, else ./policies. Exit codes: 0 clean or
warnings only; 1 review errors (or, for diff, a side that does not load); 2 usage errors.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import click

from gateway.catalog import Catalog
from gateway.cli._boundary import CheckFailed
from gateway.cli._context import settings_of
from gateway.cli._policy_history import history_command, show_stored
from gateway.cli._policy_routes import echo_routes, routes_json
from gateway.cli._policy_show import (
    contract_json,
    show_data,
    shown_policy,
    signoff_fields,
)
from gateway.cli._policy_signoff import approval_json, approval_text, echo_signoff, read_approvals
from gateway.cli._render import echo_json, open_output, shown, shown_lines, text_table
from gateway.evidence import Auditing, PolicyRecords, signoff_sheet
from gateway.policy import (
    PLACEHOLDER_INPUT,
    Finding,
    PolicyEntry,
    PolicySet,
    TaskDiff,
    caller_grants,
    contract_kind,
    diff_policy_sets,
    field_rows,
    review_policies,
)
from gateway.settings import Settings

FORMAT = click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
DIR = click.Path(file_okay=False, path_type=Path)


def _catalog(settings: Settings) -> Catalog:
    return Catalog.load(settings.catalog_override)


def _policy_dir(given: Path | None, settings: Settings) -> Path:
    return given if given is not None else settings.policy_dir


@click.group("policy")
def policy_group() -> None:
    """Review, show, compare and approve policy files."""


# --- review ----------------------------------------------------------------------------------


def _mandated(entry: PolicyEntry) -> str:
    if entry.data is None:
        return "-"
    g = entry.data.generation.model_dump(exclude_none=True, exclude_defaults=True)
    parts = [f"{k}={v}" for k, v in g.items() if k not in ("thinking", "stop_sequences")]
    if entry.data.generation.thinking is not None:
        parts.append(f"thinking={entry.data.generation.thinking.type}")
    if entry.data.generation.stop_sequences:
        parts.append(f"stop={list(entry.data.generation.stop_sequences)}")
    return " ".join(parts)


def _status(entry: PolicyEntry) -> str:
    if entry.errors:
        return f"REFUSED ({entry.errors} error{'s' if entry.errors > 1 else ''})"
    return (
        f"ok ({entry.warnings} warning{'s' if entry.warnings != 1 else ''})"
        if entry.warnings
        else "ok"
    )


def _review_row(entry: PolicyEntry) -> list[str]:
    data = entry.data
    if data is None:
        return [entry.task, "?", "-", "-", "-", "-", _status(entry)]
    return [
        entry.task,
        data.model.id,
        "yes" if data.reproducible else "no",
        data.cache.mode,
        data.output.format,
        _mandated(entry),
        _status(entry),
    ]


def _finding_json(f: Finding) -> dict[str, str]:
    return f.model_dump(mode="json")


@policy_group.command("review")
@click.argument("policy_dir", required=False, type=DIR)
@FORMAT
@click.pass_context
def review_command(ctx: click.Context, policy_dir: Path | None, fmt: str) -> None:
    """Review every policy in POLICY_DIR: a table of tasks, then every finding."""
    settings = settings_of(ctx)
    folder = _policy_dir(policy_dir, settings)
    catalog = _catalog(settings)
    report = review_policies(folder, catalog)
    policies = PolicySet.load(folder, catalog)
    today = policies.today()
    approvals = read_approvals(settings, policies) if report.entries else None
    required = settings.require_approvals
    short = [
        task
        for task, status in (approvals or {}).items()
        if required and not status.enough(required)
    ]
    if fmt == "json":
        echo_json(
            {
                "policy_dir": str(folder),
                "ok": report.ok,
                "errors": report.errors,
                "warnings": report.warnings,
                "tasks": [
                    {
                        "task": e.task,
                        "file": e.file,
                        "model_id": e.data.model.id if e.data else None,
                        "loads": e.policy is not None,
                        "fingerprint": e.policy.fingerprint if e.policy else None,
                        "generation": e.data.generation.model_dump(mode="json", exclude_none=True)
                        if e.data
                        else None,
                        "errors": e.errors,
                        "warnings": e.warnings,
                        "signoff": signoff_fields(e.data, today) if e.data else None,
                        "caller_contract": _contract_json(e),
                        "approvals": approval_json((approvals or {}).get(e.task), required)
                        if approvals is not None
                        else None,
                    }
                    for e in report.entries
                ],
                "routes": routes_json(policies, approvals, required),
                "required_approvals": required,
                "findings": [_finding_json(f) for f in report.findings],
            }
        )
    else:
        headers = ["TASK", "MODEL", "REPRODUCIBLE", "CACHE", "OUTPUT", "MANDATED", "STATUS"]
        click.echo(f"Policy review of {shown(folder)}")
        click.echo(text_table(headers, [_review_row(e) for e in report.entries]))
        click.echo("")
        echo_routes(policies, approvals, required)
        echo_signoff(report.entries, approvals, required, today)
        _echo_contracts(report.entries)
        if report.findings:
            click.echo(f"Findings ({report.errors} errors, {report.warnings} warnings):")
            for f in report.findings:
                click.echo(
                    f"  {f.severity.value.upper():7}  {shown(f.file)}  [{shown(f.key)}]  "
                    f"({shown(f.rule)})"
                )
                click.echo(f"           {shown(f.message)}")
                click.echo(f"           What to do: {shown(f.advice)}")
        else:
            click.echo("No findings: every policy loads.")
        if short:
            click.echo(
                f"Not approved: {', '.join(short)} lack {required} approvals of their current "
                "fingerprint (GATEWAY_REQUIRE_APPROVALS), so the gateway refuses them."
            )
    if not report.ok or short:
        raise CheckFailed()


def _contract_json(entry: PolicyEntry) -> dict[str, object] | None:
    return contract_json(entry.data) if entry.data is not None else None


def _echo_contracts(entries: tuple[PolicyEntry, ...]) -> None:
    """What a caller may do on each task, in sentences (the caller contract)."""
    readable = [e for e in entries if e.data is not None]
    if not readable:
        return
    click.echo("What callers may do:")
    for entry in readable:
        assert entry.data is not None
        click.echo(f"  {shown(entry.task)} ({contract_kind(entry.data)})")
        for sentence in caller_grants(entry.data):
            click.echo(f"    - {shown(sentence)}")
    click.echo("")


# --- show ------------------------------------------------------------------------------------


@policy_group.command("show")
@click.argument("task", required=False)
@click.option(
    "--fingerprint",
    help="Print the version the audit log stored under this fingerprint (sha256:...), "
    "instead of the folder's.",
)
@click.option(
    "--policy-dir", type=DIR, default=None, help="Default: GATEWAY_POLICY_DIR or ./policies."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="html: a printable sign-off sheet (with -o FILE).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE."
)
@click.pass_context
def show_command(
    ctx: click.Context,
    task: str | None,
    fingerprint: str | None,
    policy_dir: Path | None,
    fmt: str,
    output: Path | None,
) -> None:
    """Show TASK's effective settings, fingerprint and the exact request template; with
    --format html, a printable sign-off sheet (prompt, schema, tools, every finding, the
    fingerprint and its approvals). With --fingerprint FP, the version the audit log stored
    (JSON: its recorded content, exactly)."""
    if fingerprint is not None:
        if task is not None or fmt == "html" or output is not None:
            raise click.UsageError("--fingerprint takes no TASK, --format html or -o.")
        show_stored(ctx, fingerprint, fmt)
        return
    if task is None:
        raise click.UsageError("name a TASK, or a stored version with --fingerprint FP.")
    settings = settings_of(ctx)
    catalog = _catalog(settings)
    policies = PolicySet.load(_policy_dir(policy_dir, settings), catalog)
    policy = policies.get(task)
    entry = policies.entry(task)
    shown_task = shown_policy(policy, catalog, policies.today())
    data = show_data(shown_task)
    approvals = read_approvals(settings, policies, [task])
    status = approvals.get(task) if approvals is not None else None
    if fmt == "html":
        history = None
        if approvals is not None:
            with PolicyRecords.open(settings) as records:
                history = records.signoff(policy, settings.require_approvals)
        sheet = signoff_sheet(
            policy,
            shown_task.model,
            entry.findings if entry is not None else (),
            status,
            required=settings.require_approvals,
            approvals_note=None if approvals is not None else "No audit database: no approvals.",
            made_by=getpass.getuser(),
            history=history,
        )
        with open_output(output) as out:
            out.write(sheet)
        if output is not None:
            click.echo(f"sign-off sheet written to {shown(output)}", err=True)
        return
    if approvals is not None:
        data["approvals"] = approval_json(status, settings.require_approvals)
    if fmt == "json":
        echo_json(data)
        return
    rows = [
        *field_rows(shown_task),  # the policy's field table, then what the database says
        (
            "approvals",
            approval_text(status, settings.require_approvals)
            if approvals is not None
            else "no audit database",
        ),
    ]
    click.echo(text_table(["SETTING", "VALUE"], rows))
    click.echo("")
    click.echo(
        f"Request template (anthropic-version {shown(data['api_version'])}; the user input is "
        f"shown as {PLACEHOLDER_INPUT!r}):"
    )
    body = json.dumps(data["request_template"]["body"], indent=2, ensure_ascii=False)
    click.echo(shown_lines(body))


# --- diff ------------------------------------------------------------------------------------


def _diff_json(d: TaskDiff) -> dict[str, Any]:
    return {
        "task": d.task,
        "status": d.status,
        "old_fingerprint": d.old_fingerprint,
        "new_fingerprint": d.new_fingerprint,
        "changes": [{"key": c.key, "old": c.old, "new": c.new, "risk": c.risk} for c in d.changes],
        "text_diffs": [{"key": x.key, "diff": list(x.lines)} for x in d.text_diffs],
        "new_findings": [_finding_json(f) for f in d.new_findings],
        "not_loading": [
            {"side": f.side, "file": f.file, "errors": [_finding_json(e) for e in f.errors]}
            for f in d.failures
        ],
    }


def _echo_diff(d: TaskDiff) -> None:
    click.echo(f"{shown(d.task)}: {shown(d.status)}")
    for failure in d.failures:
        click.echo(
            f"    the {failure.side} side ({shown(failure.file)}) does not load: "
            f"{len(failure.errors)} error(s)"
        )
        for f in failure.errors:
            click.echo(f"        ERROR  [{shown(f.key)}]  ({shown(f.rule)})  {shown(f.message)}")
    if d.status == "not-loadable":
        click.echo("    one side does not pass review; run 'gateway policy review' on it")
    for c in d.changes:
        click.echo(f"    {shown(c.key)}: {json.dumps(c.old)} -> {json.dumps(c.new)}")
        if c.risk:
            click.echo(f"        risk: {shown(c.risk)}")
    for text in d.text_diffs:
        click.echo(f"    {shown(text.key)} (unified diff):")
        for line in text.lines:
            click.echo(f"        {shown(line)}")
    # The new side's errors are listed above when it does not load; its warnings here.
    listed = any(f.side == "new" for f in d.failures)
    findings = [f for f in d.new_findings if not (listed and f.severity.value == "error")]
    if d.status in ("changed", "added", "not-loadable") and findings:
        click.echo(f"    review of the new side: {len(findings)} finding(s)")
        for f in findings:
            click.echo(
                f"        {f.severity.value.upper():7}  [{shown(f.key)}]  ({shown(f.rule)})  "
                f"{shown(f.message)}"
            )


@policy_group.command("diff")
@click.argument("old_dir", type=DIR)
@click.argument("new_dir", type=DIR)
@FORMAT
@click.pass_context
def diff_command(ctx: click.Context, old_dir: Path, new_dir: Path, fmt: str) -> None:
    """Compare the policies in OLD_DIR with NEW_DIR: field by field with risk notes, a
    unified diff of changed prompts, schemas and tools, and the new side's review findings."""
    catalog = _catalog(settings_of(ctx))
    diffs = diff_policy_sets(PolicySet.load(old_dir, catalog), PolicySet.load(new_dir, catalog))
    if fmt == "json":
        echo_json(
            {
                "old_dir": str(old_dir),
                "new_dir": str(new_dir),
                "tasks": [_diff_json(d) for d in diffs],
            }
        )
    else:
        for d in diffs:
            _echo_diff(d)
        if not diffs:
            click.echo("no tasks in either folder")
    if any(d.status == "not-loadable" for d in diffs):
        raise CheckFailed()


# --- approve ---------------------------------------------------------------------------------


@policy_group.command("approve")
@click.argument("task")
@click.option("--approver", required=True, help="Your name, recorded with the approval.")
@click.option(
    "--fingerprint",
    help="The fingerprint you reviewed (sha256:...): refused if the folder's version differs.",
)
@click.option(
    "--policy-dir", type=DIR, default=None, help="Default: GATEWAY_POLICY_DIR or ./policies."
)
@FORMAT
@click.pass_context
def approve_command(
    ctx: click.Context,
    task: str,
    approver: str,
    fingerprint: str | None,
    policy_dir: Path | None,
    fmt: str,
) -> None:
    """Sign TASK's current fingerprint with your approver key (GATEWAY_APPROVER_KEY); the
    approval is recorded in the audit log as an APPROVAL event. With --fingerprint, only if
    it is the version you reviewed; with approver keys pinned, only with the key pinned for
    your name (else nothing is recorded)."""
    settings = settings_of(ctx)
    policies = PolicySet.load(_policy_dir(policy_dir, settings), _catalog(settings))
    with Auditing.open(settings) as auditing:
        status, recorded = auditing.approve(policies, task, approver=approver, reviewed=fingerprint)
    required = settings.require_approvals
    # Recorded is not counted: under pinned keys, an approver without a pin (or signing with
    # another key than theirs) has written an approval that no check will count.
    counted = approver in status.approvers
    why = next((r for r in reversed(status.rejected) if f": {approver}" in r), None)
    if fmt == "json":
        echo_json(
            {
                "task": task,
                "approver": approver,
                "recorded": recorded,
                "counted": counted,
                **(approval_json(status, required) or {}),
            }
        )
    else:
        what = "approved" if recorded else "already approved by you:"
        click.echo(f"{what} {shown(task)} {shown(status.fingerprint)} as {shown(approver)}")
        click.echo(f"approvals of this version: {shown(approval_text(status, required))}")
        if not counted:
            click.echo(
                f"this approval does not count: {shown(why or 'see policy review')}; ask for "
                "your public key to be pinned (GATEWAY_TRUSTED_APPROVERS_FILE).",
                err=True,
            )
    if not counted:
        raise CheckFailed()


# Defined in their own module; added here so `gateway policy` lists them in one group.
policy_group.add_command(history_command)
