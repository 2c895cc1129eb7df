"""A printable sign-off sheet for one task's policy: what it makes the model do, every review
finding, the fingerprint being approved, and who has approved it.

    html = signoff_sheet(policy, model, findings, approvals, required=2, made_by="j.smith")
    Path("sheet.html").write_text(html, encoding="utf-8")

Self-contained (no scripts, no external resources, a Content-Security-Policy that allows
only inline styles) and print-friendly (A4, sections never split across pages, a signature
block). Every value is escaped: a system prompt or a tool description is text someone wrote,
and the sheet must show it, not run it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from gateway._keys import GATEWAY_VERSION
from gateway.catalog import ModelInfo
from gateway.evidence._approvals import ApprovalStatus
from gateway.evidence._policy_records import SignoffHistory
from gateway.policy import PLACEHOLDER_INPUT, Finding, Policy, Shown, field_rows

__all__ = ["PLACEHOLDER_INPUT", "signoff_sheet"]

_CSS = """
@page { size: A4; margin: 16mm 14mm; }
body { font: 10.5pt/1.4 system-ui, "DejaVu Sans", sans-serif; color: #111; margin: 1.5em auto;
       max-width: 190mm; }
h1 { font-size: 17pt; margin: 0 0 .2em; } h2 { font-size: 12.5pt; margin: 1.2em 0 .4em;
  border-bottom: 1.5px solid #333; padding-bottom: 2px; }
.meta { color: #444; margin: 0 0 1em; }
table { border-collapse: collapse; width: 100%; margin: .3em 0; }
th, td { border: 1px solid #999; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #eee; width: 28%; font-weight: 600; }
table.list th { width: auto; }
pre, code { font: 9pt/1.35 ui-monospace, "DejaVu Sans Mono", monospace; }
pre { background: #f5f5f5; border: 1px solid #ccc; padding: 6px; white-space: pre-wrap;
      overflow-wrap: anywhere; margin: .3em 0; }
.fp { font-weight: 700; overflow-wrap: anywhere; }
.error { color: #a00; font-weight: 700; } .warning { color: #8a5a00; font-weight: 700; }
.info { color: #333; } .ok { color: #116329; font-weight: 700; }
.missing { color: #a00; font-weight: 700; }
section { break-inside: avoid; page-break-inside: avoid; }
.sign td { height: 2.2em; } .sign th { width: 22%; }
footer { margin-top: 1.5em; color: #555; font-size: 9pt; }
@media print { body { margin: 0; max-width: none; } a { color: inherit; } }
"""


def _rows(pairs: Sequence[tuple[str, str]]) -> str:
    return "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in pairs)


def _pre(text: str) -> str:
    return f"<pre>{escape(text)}</pre>"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _findings(findings: Sequence[Finding]) -> str:
    if not findings:
        return "<p class='ok'>No findings: the review raised nothing for this task.</p>"
    rows = "".join(
        f"<tr><td class='{escape(f.severity.value)}'>{escape(f.severity.value.upper())}</td>"
        f"<td><code>{escape(f.rule)}</code></td><td><code>{escape(f.key)}</code></td>"
        f"<td>{escape(f.message)}<br><em>What to do:</em> {escape(f.advice)}</td></tr>"
        for f in findings
    )
    return (
        "<table class='list'><tr><th>severity</th><th>rule</th><th>key</th>"
        f"<th>finding</th></tr>{rows}</table>"
    )


def _approvals(
    status: ApprovalStatus | None,
    required: int,
    note: str | None,
    dates: Mapping[int, datetime] | None = None,
) -> str:
    if status is None:
        return f"<p>{escape(note or 'Approvals were not read.')}</p>"
    count = len(status.approvers)
    if required:
        verdict = (
            f"<span class='ok'>{count} of {required} required: enough</span>"
            if status.enough(required)
            else f"<span class='missing'>{count} of {required} required: NOT ENOUGH, the "
            "gateway refuses this task</span>"
        )
    else:
        verdict = f"{count} approval(s); none required (GATEWAY_REQUIRE_APPROVALS unset)"
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{escape(_when((dates or {}).get(seq)))}</td>"
        f"<td>APPROVAL event seq {seq}</td></tr>"
        for name, seq in zip(status.approvers, status.seqs, strict=False)
    )
    table = (
        "<table class='list'><tr><th>approver</th><th>approved (UTC)</th><th>recorded</th></tr>"
        f"{rows}</table>"
        if rows
        else "<p>Nobody has approved this fingerprint yet.</p>"
    )
    rejected = "".join(f"<li>{escape(line)}</li>" for line in status.rejected)
    rejected_html = f"<p>Not counted:</p><ul>{rejected}</ul>" if rejected else ""
    pins = (
        "Approver keys are pinned: an approval counts only when signed by the key registered "
        "for its approver (GATEWAY_TRUSTED_APPROVERS_FILE)."
        if status.pinned
        else "Approver keys are not pinned: an approval signed by any key under any name "
        "counts, so set GATEWAY_TRUSTED_APPROVERS_FILE where four eyes must be proven."
    )
    return (
        f"<p>Approvals of fingerprint <code>{escape(status.fingerprint)}</code>: {verdict}. "
        "Each is an Ed25519 signature of the exact fingerprint by the approver's own key, "
        f"recorded in the audit log.</p>{table}{rejected_html}<p>{escape(pins)}</p>"
    )


def _when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if moment is not None else "-"


def _since_approved(policy: Policy, history: SignoffHistory | None) -> str:
    """What changed since the last approved version, so approvers review the change, not
    only the whole."""
    if history is None:
        return "<p>Not read: no audit database.</p>"
    last = history.last_approved
    if last is None:
        return "<p>No earlier version of this task was approved in this audit log.</p>"
    head = (
        f"<p>The last approved version was <code>{escape(last.fingerprint)}</code>, approved "
        f"by {escape(', '.join(f'{a.approver} ({_when(a.at)})' for a in last.approvals))}"
        f"; in use {escape(_when(last.first_used))} to {escape(_when(last.last_used))}.</p>"
    )
    diff = history.changes
    if diff is None:
        return head + "<p>Its stored content cannot be compared with this version.</p>"
    if not diff.changes:
        return head + "<p>No field differs from it.</p>"
    rows = "".join(
        f"<tr><td><code>{escape(c.key)}</code></td><td>{escape(json.dumps(c.old))}</td>"
        f"<td>{escape(json.dumps(c.new))}</td><td>{escape(c.risk or '')}</td></tr>"
        for c in diff.changes
    )
    texts = "".join(
        f"<p>{escape(t.key)} (unified diff):</p>{_pre(chr(10).join(t.lines))}"
        for t in diff.text_diffs
    )
    return (
        head + "<table class='list'><tr><th>setting</th><th>approved</th><th>this version</th>"
        f"<th>risk</th></tr>{rows}</table>{texts}"
    )


def _tools(policy: Policy) -> str:
    tools = policy.tools
    parts = []
    for tool in tools.definitions or []:
        name = str(tool.get("name", "?"))
        desc = str(tool.get("description", ""))
        schema = tool.get("input_schema")
        strict = " (strict)" if tool.get("strict") else ""
        parts.append(
            f"<p><code>{escape(name)}</code>{escape(strict)}: {escape(desc)}</p>"
            + (_pre(_json(schema)) if schema is not None else "")
        )
    if tools.server:
        parts.append("<p>Server tools allowed: " + escape(", ".join(tools.server)) + "</p>")
    if not parts:
        return "<p>No tools: the model can only answer in text.</p>"
    return f"<p>tool_choice: <code>{escape(tools.chosen)}</code></p>" + "".join(parts)


def signoff_sheet(
    policy: Policy,
    model: ModelInfo,
    findings: Sequence[Finding],
    approvals: ApprovalStatus | None,
    *,
    required: int = 0,
    approvals_note: str | None = None,
    made_by: str | None = None,
    made_at: datetime | None = None,
    history: SignoffHistory | None = None,
) -> str:
    """The sheet as one HTML document. ``approvals`` is None when they could not be read
    (``approvals_note`` says why, e.g. no audit database); ``history`` (from the log: the
    approvals' dates, the last approved version) is None when there is no log to read."""
    made_at = made_at or datetime.now(UTC)
    # Its effective date is judged on the sheet's own date.
    day = made_at.astimezone(UTC).date()
    shown = Shown.of(policy, model, today=day, day_named=" on this sheet's date")
    signoff = _rows(field_rows(shown, "signoff"))
    what = _rows(field_rows(shown, "settings"))
    errors = sum(f.severity.value == "error" for f in findings)
    warnings = sum(f.severity.value == "warning" for f in findings)
    system, schema_value = policy.prompt.system, policy.output.json_schema
    prompt = _pre(system) if system is not None else "<p>No system prompt.</p>"
    schema = _pre(_json(schema_value)) if schema_value is not None else "<p>No output schema.</p>"
    title = f"Policy sign-off: {policy.task}"
    dates = history.approved_at if history is not None else None
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">"
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        f"<p class='meta'>Made {escape(made_at.strftime('%Y-%m-%d %H:%M UTC'))}"
        + (f" by {escape(made_by)}" if made_by else "")
        + f" with compliance-gateway {escape(GATEWAY_VERSION)}. "
        "What is approved is the fingerprint below: any change to the policy (prompt, schema, "
        "model, parameters, tools) makes a new fingerprint that needs its own approvals.</p>"
        f"<section><h2>Fingerprint</h2><p class='fp'><code>{escape(policy.fingerprint)}"
        "</code></p></section>"
        f"<section><h2>Sign-off</h2><table>{signoff}</table></section>"
        f"<section><h2>What the task makes the model do</h2><table>{what}</table></section>"
        f"<section><h2>System prompt</h2>{prompt}</section>"
        f"<section><h2>Output schema</h2>{schema}</section>"
        f"<section><h2>Tools</h2>{_tools(policy)}</section>"
        f"<section><h2>Review findings ({errors} errors, {warnings} warnings)</h2>"
        f"{_findings(findings)}</section>"
        "<section><h2>Approvals</h2>"
        f"{_approvals(approvals, required, approvals_note, dates)}"
        "</section>"
        "<section><h2>Changes since the last approved version</h2>"
        f"{_since_approved(policy, history)}</section>"
        "<section><h2>Signatures</h2><table class='sign'>"
        "<tr><th>first approver</th><td></td><th>date</th><td></td></tr>"
        "<tr><th>second approver</th><td></td><th>date</th><td></td></tr></table>"
        "<p>Sign only if the fingerprint above is the one shown by "
        f"<code>gateway policy show {escape(policy.task)}</code> at signing.</p></section>"
        "<footer>Generated by <code>gateway policy show "
        f"{escape(policy.task)} --format html</code>.</footer>"
        "</body></html>\n"
    )
