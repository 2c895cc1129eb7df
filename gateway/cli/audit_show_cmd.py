"""`gateway audit show REQUEST_ID`: a request's whole life, and with --content what it said.

    $ gateway audit show req_4f2a... --format json
    $ gateway audit show req_4f2a... --content --reviewer j.smith    # recorded as a read

Its own module, as `audit list` is: the command a reviewer runs most after `list` loads
without the group's other commands (gateway.cli.audit_lazy_cmd).
"""

from __future__ import annotations

import json
from typing import Any

import click

from gateway import evidence
from gateway.cli._context import settings_of
from gateway.cli._policy_versions import approvals_text, version_json, when
from gateway.cli._render import echo_json, shown
from gateway.evidence import (
    Auditing,
    EventKind,
    PolicyRecords,
    RecordedContent,
    StoredEvent,
)
from gateway.policy import caller_parts

__all__ = ["show_command"]


@click.command("show")
@click.argument("request_id")
@click.option(
    "--content",
    is_flag=True,
    help="Also print the system prompt, the messages and the answer, once the record checks "
    "out; the read is recorded as an ACCESS event (needs --reviewer).",
)
@click.option("--reviewer", help="Who is reading the content (recorded with the read).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def show_command(
    ctx: click.Context, request_id: str, content: bool, reviewer: str | None, fmt: str
) -> None:
    """A request's whole life: intent, attempts, outcome or cache hit; with --content, what
    was asked and what came back."""
    if content and reviewer is None:
        raise click.UsageError("--content needs --reviewer NAME: every content read is recorded")
    if reviewer is not None and not content:
        raise click.UsageError("--reviewer is recorded with a content read: add --content")
    erased = None
    if reviewer is not None:  # the erasing half loads only for a content read (start-up)
        with evidence.Erasing.open(settings_of(ctx)) as erasing:
            erased = erasing.erasure_of(request_id)
    with Auditing.open(settings_of(ctx)) as auditing:
        events = auditing.request_events(request_id)
        recorded = (
            auditing.read_content(request_id, reviewer=reviewer)
            if reviewer is not None and erased is None
            else None
        )
        reads = auditing.reads_of(request_id)
        pending = auditing.pending_integration(events)
        coverage = _coverage(auditing, events)
    first = events[0]
    fingerprint = next((e.policy_fingerprint for e in events if e.policy_fingerprint), None)
    version = None
    if fingerprint is not None and first.task is not None:
        with PolicyRecords.open(settings_of(ctx)) as records:
            version = records.version(first.task, fingerprint)
    if fmt == "json":
        rows = [
            {**e.json_row(), **({"pending_integration": True} if e.seq in pending else {})}
            for e in events
        ]
        out: dict[str, Any] = {"request_id": request_id, "coverage": coverage, "events": rows}
        out["policy_version"] = version_json(version) if version is not None else None
        if reads:
            out["reads"] = [_read_json(e) for e in reads]
        if recorded is not None:
            out["content"] = recorded.model_dump(mode="json")
        if erased is not None:
            out["content"] = {"erased": erased.model_dump(mode="json")}
        echo_json(out)
        return
    click.echo(
        f"request {shown(request_id)}  task {shown(first.task or '-')}  "
        f"caller {shown(first.caller or '-')}"
    )
    click.echo(f"policy {shown(fingerprint or '-')}")
    if version is not None:  # the version as a record: when it was in force, who approved it
        click.echo(
            f"  in use {when(version.first_used)} to {when(version.last_used)} UTC "
            f"({version.requests} request(s)); approved by {shown(approvals_text(version))}"
        )
    parts = ", ".join(coverage["caller_supplied"]) or "nothing"
    click.echo(f"contract {shown(coverage['contract'] or '-')}; caller-supplied: {shown(parts)}")
    for e in events:
        # Format 2: committed and signed, not yet linked into the chain by the integrator.
        mark = "  (pending integration)" if e.seq in pending else ""
        click.echo(
            f"  seq {e.seq:<8} {e.recorded_at:%Y-%m-%d %H:%M:%S.%f}  {shown(e.kind.value)}{mark}"
        )
        for key in sorted(e.data):
            value = shown(json.dumps(e.data[key], ensure_ascii=False))
            cut = f" [truncated, {len(value)} characters]" if len(value) > SHOW_CUT else ""
            click.echo(f"      {shown(key)}: {value[:SHOW_CUT]}{cut}")
        for name, digest in sorted(e.payload_digests.items()):
            click.echo(f"      payload {shown(name)}: {shown(digest)}")
    if reads:
        click.echo("content read by:")
        for e in reads:
            state = "shown" if e.data.get("shown") is True else "REFUSED"
            click.echo(
                f"  seq {e.seq:<8} {e.recorded_at:%Y-%m-%d %H:%M:%S}  "
                f"{shown(e.data.get('reviewer') or e.caller or '-')}  {state}"
            )
    if recorded is not None:
        _print_content(recorded)
    if erased is not None:
        click.echo(shown(erased.text()))


def _coverage(auditing: Auditing, events: list[StoredEvent]) -> dict[str, Any]:
    """The caller contract the request ran under, and the parts its caller brought (as its
    intent, or its refusal, recorded them)."""
    first = next((e for e in events if e.kind in (EventKind.REQUEST, EventKind.REJECTED)), None)
    fingerprint = first.policy_fingerprint if first is not None else None
    requested = first.data.get("requested") if first is not None else None
    return {"contract": auditing.contract(fingerprint), "caller_supplied": caller_parts(requested)}


SHOW_CUT = 200  # characters of one data value in text output; the rest is marked, never lost
INDENT = "    "  # content lines are indented, so no recorded text can pass for a heading


def _read_json(event: StoredEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "recorded_at": event.recorded_at.isoformat(),
        "reviewer": event.data.get("reviewer"),
        "shown": event.data.get("shown"),
        "read": event.data.get("read"),
    }


def _block_text(block: Any) -> str:
    if isinstance(block, dict) and isinstance(block.get("text"), str):
        return str(block["text"])
    return json.dumps(block, ensure_ascii=False, sort_keys=True)


def _content_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_block_text(b) for b in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _echo_block(text: str) -> None:
    for line in text.split("\n"):
        click.echo(f"{INDENT}{shown(line)}")


def _print_content(recorded: RecordedContent) -> None:
    seqs = ", ".join(str(s) for s in recorded.seqs)
    click.echo(
        f"content (record checked: seq {seqs}; this read is recorded as seq {recorded.access_seq})"
    )
    if recorded.served_from is not None:
        click.echo(f"  served from the recorded answer of {shown(recorded.served_from)}")
    click.echo("  system prompt:")
    _echo_block(_content_text(recorded.system) if recorded.system is not None else "(none)")
    for n, message in enumerate(recorded.messages, 1):
        role = message.get("role") if isinstance(message, dict) else None
        body = message.get("content") if isinstance(message, dict) else message
        click.echo(f"  message {n} ({shown(role or '?')}):")
        _echo_block(_content_text(body))
    model = f", model {shown(recorded.model)}" if recorded.model else ""
    click.echo(f"  answer ({shown(recorded.outcome)}{model}):")
    if recorded.answer is None:
        _echo_block("(no answer recorded)")
    else:
        _echo_block(recorded.answer)
    for block in recorded.answer_blocks:
        if not (isinstance(block, dict) and block.get("type") == "text"):
            click.echo(
                f"  answer block ({shown(block.get('type') if isinstance(block, dict) else '?')}):"
            )
            _echo_block(_block_text(block))
