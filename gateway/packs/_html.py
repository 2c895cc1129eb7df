"""The pack's summary page: what the regime asks, the evidence, pass or fail per item.

    html = summary_html(summary)          # summary: the dict summary.json holds

Written for a reader who is not an engineer: each item in a sentence, its verdict in a word
and a colour, the evidence with its counts and dates, and the files an outside party checks
with the commands to check them. Self-contained (no script, no external resource, a
Content-Security-Policy that allows inline styles only); every value is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any

from gateway.packs._retention import retention_html

_CSS = """
@page { size: A4; margin: 16mm 14mm; }
body { font: 10.5pt/1.45 system-ui, "DejaVu Sans", sans-serif; color: #111; margin: 1.5em auto;
       max-width: 190mm; }
h1 { font-size: 17pt; margin: 0 0 .2em; } h2 { font-size: 12.5pt; margin: 1.3em 0 .4em;
  border-bottom: 1.5px solid #333; padding-bottom: 2px; }
.meta { color: #444; margin: 0 0 1em; }
table { border-collapse: collapse; width: 100%; margin: .3em 0; }
th, td { border: 1px solid #999; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #eee; font-weight: 600; }
.pass { background: #d9f2dc; font-weight: 700; } .fail { background: #f8d4d4; font-weight: 700; }
.manual { background: #fff1c2; font-weight: 700; }
.verdict { font-size: 12pt; padding: .5em .8em; border: 1.5px solid #333; margin: .8em 0; }
code, pre { font: 9pt/1.35 ui-monospace, "DejaVu Sans Mono", monospace; }
td code { word-break: break-all; }
pre { background: #f5f5f5; border: 1px solid #ccc; padding: 6px; white-space: pre-wrap; }
section { break-inside: avoid; }
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _items(summary: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{n}</td><td>{_e(i['asks'])}<br><small>{_e(i['source'])}</small></td>"
        f'<td class="{_e(i["status"])}">{_e(i["status"].upper())}</td>'
        f"<td>{_e(i['evidence'])}</td></tr>"
        for n, i in enumerate(summary["items"], 1)
    )
    return (
        '<section id="items"><h2>Requirements and evidence</h2><table class="list">'
        "<tr><th>#</th><th>What the regime asks (source)</th><th>Verdict</th>"
        f"<th>Evidence</th></tr>{rows}</table></section>"
    )


def _counts(summary: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in summary["counts"].items()
    )
    return (
        '<section id="counts"><h2>The period in numbers</h2><table class="list">'
        f"<tr><th>Status</th><th>Requests</th></tr>{rows}</table></section>"
    )


def _files(summary: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td><code>{_e(name)}</code></td><td>{_e(f['what'])}</td>"
        f"<td><code>{_e(f['sha256'][:23])}…</code></td></tr>"
        for name, f in summary["files"].items()
    )
    commands = "\n".join(summary["check_commands"])
    return (
        '<section id="files"><h2>Files for an outside party</h2>'
        "<p>Each file's SHA-256 is also recorded in the audit log (the evidence-pack event "
        f"at seq {_e(summary['recorded_seq'])}).</p>"
        f'<table class="list"><tr><th>File</th><th>What it is</th><th>SHA-256</th></tr>{rows}'
        "</table><p>To check them without the gateway (Python 3.11 and "
        f"<code>cryptography</code>):</p><pre>{_e(commands)}</pre></section>"
    )


def summary_html(summary: dict[str, Any]) -> str:
    regime = summary["regime"]
    failed = [i for i in summary["items"] if i["status"] == "fail"]
    manual = [i for i in summary["items"] if i["status"] == "manual"]
    overall = (
        f"{len(failed)} of {len(summary['items'])} item(s) FAIL"
        if failed
        else f"all {len(summary['items']) - len(manual)} checked item(s) pass"
    ) + (f"; {len(manual)} need(s) a document from outside the log" if manual else "")
    cls = "fail" if failed else "pass"
    sources = "".join(f"<li>{_e(s)}</li>" for s in regime["sources"])
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f"<title>Evidence pack: {_e(regime['title'])}</title><style>{_CSS}</style></head><body>"
        f"<h1>Evidence pack: {_e(regime['title'])}</h1>"
        f'<p class="meta">Period {_e(summary["period"]["from"])} to '
        f"{_e(summary['period']['to'])} (UTC, both days included) · built "
        f"{_e(summary['built_at'])} by {_e(summary['built_by'])} · audit database "
        f"{_e(summary['store_id'])}</p>"
        f'<div class="verdict {cls}" id="verdict">{_e(overall)}</div>'
        f'<section id="asks"><h2>What the regime asks</h2><p>{_e(regime["summary"])}</p>'
        f"<ul>{sources}</ul></section>"
        + _items(summary)
        + _counts(summary)
        + retention_html(summary)
        + _files(summary)
        + "</body></html>\n"
    )
