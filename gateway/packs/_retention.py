"""The period's erasures and legal holds, as a pack lists them (docs/evidence.md).

    section = retention_section(auditing, since, until)
    # {"erasures": {"count": 3, "by_rule": {...}, "listed": [...], "left_out": 0},
    #  "holds": [{"hold_id": ..., "scope": ..., "reason": ..., "placed_by": ..., ...}]}

What was erased (which request, under which rule, by whom, approved by whom) and which
holds were placed or released in the period: their events are in the pack's signed
export, so each entry names its seq for a reader to check there.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from html import escape
from typing import Any

from audit import EventFilter, EventKind, StoredEvent
from gateway.evidence import Auditing

__all__ = ["LISTED", "retention_html", "retention_section"]

LISTED = 100  # erasures listed one by one (a purge may make thousands); the rest counted


def retention_section(auditing: Auditing, since: datetime, until: datetime) -> dict[str, Any]:
    def of(kind: EventKind) -> list[StoredEvent]:
        return auditing.events(EventFilter(kind=kind, since=since, until=until))

    erasures = of(EventKind.ERASURE)
    released = {e.request_id: e for e in of(EventKind.HOLD_RELEASE)}
    holds = []
    for hold in of(EventKind.LEGAL_HOLD):
        scope = hold.data.get("scope")
        release = released.pop(hold.request_id, None)
        holds.append(
            {
                "hold_id": hold.request_id,
                "seq": hold.seq,
                "placed_at": _at(hold),
                "scope": {k: v for k, v in scope.items() if v is not None}
                if isinstance(scope, dict)
                else {},
                "reason": hold.data.get("reason"),
                "placed_by": hold.data.get("actor"),
                "released": _release(release) if release else None,
            }
        )
    for hold_id, release in released.items():  # placed before the period, released in it
        holds.append({"hold_id": hold_id, "released": _release(release)})
    return {
        "erasures": {
            "count": len(erasures),
            "by_rule": dict(Counter(str(e.data.get("rule")) for e in erasures)),
            "listed": [_erasure(e) for e in erasures[:LISTED]],
            "left_out": max(0, len(erasures) - LISTED),
        },
        "holds": holds,
    }


def _at(event: StoredEvent) -> str:
    return event.recorded_at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _erasure(event: StoredEvent) -> dict[str, Any]:
    data = event.data
    return {
        "seq": event.seq,
        "request_id": data.get("erased_request", event.request_id),
        "at": _at(event),
        "rule": data.get("rule"),
        "reason": data.get("reason"),
        "by": data.get("actor"),
        "approved_by": data.get("approver"),
        "payloads_erased": len(data.get("erased") or []),
    }


def _release(event: StoredEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "at": _at(event),
        "reason": event.data.get("reason"),
        "by": event.data.get("actor"),
    }


def retention_html(summary: dict[str, Any]) -> str:
    """The summary page's section for :func:`retention_section` (every value escaped)."""
    section = summary.get("retention")
    if not section:
        return ""
    erasures, holds = section["erasures"], section["holds"]
    rules = ", ".join(f"{_e(r)}: {_e(n)}" for r, n in sorted(erasures["by_rule"].items()))
    rows = "".join(
        f"<tr><td>{_e(x['seq'])}</td><td><code>{_e(x['request_id'])}</code></td>"
        f"<td>{_e(x['at'])}</td><td>{_e(x['rule'])}: {_e(x['reason'])}</td>"
        f"<td>{_e(x['by'])}</td><td>{_e(x['approved_by'] or '(the policy: retention)')}</td></tr>"
        for x in erasures["listed"]
    )
    more = (
        f"<p>{_e(erasures['left_out'])} more in export.jsonl.</p>" if erasures["left_out"] else ""
    )
    held = "".join(
        f"<tr><td><code>{_e(h['hold_id'])}</code></td>"
        f"<td>{_e(', '.join(f'{k}={v}' for k, v in h.get('scope', {}).items()))}</td>"
        f"<td>{_e(h.get('reason', ''))}</td><td>{_e(h.get('placed_by', ''))}</td>"
        f"<td>{_e(_released(h.get('released')))}</td></tr>"
        for h in holds
    )
    return (
        '<section id="retention"><h2>Erasures and legal holds in the period</h2>'
        f"<p>{_e(erasures['count'])} request(s) erased"
        + (f" ({rules})" if rules else "")
        + ".</p>"
        + (
            '<table class="list"><tr><th>Seq</th><th>Request</th><th>When</th>'
            f"<th>Rule: reason</th><th>By</th><th>Approved by</th></tr>{rows}</table>{more}"
            if rows
            else ""
        )
        + (
            '<table class="list"><tr><th>Hold</th><th>Scope</th><th>Reason</th>'
            f"<th>Placed by</th><th>Released</th></tr>{held}</table>"
            if held
            else "<p>No legal hold placed or released.</p>"
        )
        + "</section>"
    )


def _released(release: dict[str, Any] | None) -> str:
    if not release:
        return "in force"
    return f"{release['at']} by {release['by']} (seq {release['seq']}): {release['reason']}"


def _e(value: object) -> str:
    return escape(str(value), quote=True)
