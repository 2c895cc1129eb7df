"""Build one regime's evidence pack: a folder a regulator or an outside auditor can take away.

    result = build_pack(settings, "dora", date(2026, 9, 1), date(2026, 11, 30),
                        Path("packs/dora-q3"), reviewer="a.auditor")
    result.summary["items"]          # each requirement, its verdict and evidence

The folder holds index.html (the summary a non-engineer reads), summary.json (the same,
for machines), export.jsonl (the period's signed events), checkpoint.json and receipts/ (a
signed head of the log and sample requests proven into it, when a checkpoint key is set),
public-keys.json and verify_evidence.py (the standalone verifier). Before the summary is
written the pack is recorded on the log as an EVIDENCE_PACK event naming the regime, the
period, the builder, each verdict and the SHA-256 of every file it vouches for.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from importlib.resources import files
from pathlib import Path
from typing import Any

from audit import EventFilter
from gateway._inputs import check_name
from gateway.errors import GatewayError, InputError
from gateway.evidence import (
    Auditing,
    checkpoint_text,
    prove,
    receipt_text,
    record_pack,
    verify_export,
)
from gateway.keys import public_keys, public_keys_text
from gateway.packs._facts import CALLS, gather
from gateway.packs._html import summary_html
from gateway.packs._regimes import REGIMES, Regime
from gateway.packs._retention import retention_section
from gateway.settings import Settings

__all__ = ["PackResult", "build_pack"]

VERIFIER = "verify_evidence.py"
SAMPLE_RECEIPTS = 3  # requests proven into the checkpoint: the first, a middle one, the last


@dataclass(frozen=True)
class PackResult:
    folder: Path
    recorded_seq: int
    summary: dict[str, Any]


def _regime(key: str) -> Regime:
    regime = REGIMES.get(key)
    if regime is None:
        raise InputError(
            f"no evidence pack for regime {key!r}.", hint=f"Use one of: {', '.join(REGIMES)}."
        )
    return regime


def _folder(out: Path) -> Path:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(
            f"{str(out)!r} exists and is not an empty folder: a pack never overwrites files.",
            hint="Pass a new folder with -o.",
        )
    try:
        (out / "receipts").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the pack folder {str(out)!r}: {exc.strerror}.") from None
    return out


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def build_pack(
    settings: Settings,
    regime_key: str,
    first_day: date,
    last_day: date,
    out: Path,
    *,
    reviewer: str,
    with_content: bool = False,
) -> PackResult:
    """Build the pack of ``regime_key`` for the days ``first_day``..``last_day`` (UTC, both
    included) in ``out`` (new or empty), recorded on the log as built by ``reviewer``;
    ``with_content``: the export carries each request's prompt and answer with the evidence
    that checks them (a content read, recorded as such)."""
    regime = _regime(regime_key)
    name = check_name(reviewer, "reviewer", example="j.smith")
    if not name:
        raise InputError("an evidence pack needs the name of who builds it: it is recorded.")
    if last_day < first_day:
        raise InputError(f"--to {last_day} is before --from {first_day}.")
    since = datetime.combine(first_day, time(), UTC)
    until = datetime.combine(last_day + timedelta(days=1), time(), UTC)
    folder = _folder(out)
    described: dict[str, str] = {}
    with Auditing.open(settings) as auditing:
        verified = auditing.verify()
        with (folder / "export.jsonl").open("w", encoding="utf-8", newline="") as handle:
            period = EventFilter(since=since, until=until)
            auditing.export(handle, "jsonl", period, reviewer=name, with_content=with_content)
        described["export.jsonl"] = "the period's events, signed, with the EXPORT record" + (
            " and each request's content" if with_content else ""
        )
        keys = public_keys(settings)
        (folder / "public-keys.json").write_text(public_keys_text(keys), encoding="utf-8")
        described["public-keys.json"] = "record, checkpoint and integrator public keys"
        shutil.copyfile(
            Path(str(files("gateway.packs") / "_verifier" / VERIFIER)), folder / VERIFIER
        )
        described[VERIFIER] = "the standalone verifier (docs/evidence-format.md)"
        if settings.checkpoint_key is not None:
            head = auditing.checkpoint()
            (folder / "checkpoint.json").write_text(checkpoint_text(head), encoding="utf-8")
            described["checkpoint.json"] = f"the log's head at seq {head.seq}, signed"
            rows = [
                r
                for r in auditing.requests(EventFilter(since=since, until=until), limit=None)
                if r.status in CALLS
            ]
            picks = {rows[i].request_id for i in (0, len(rows) // 2, -1)} if rows else set()
            for request_id in sorted(picks)[:SAMPLE_RECEIPTS]:
                try:
                    receipt = receipt_text(prove(settings, request_id))
                except GatewayError:
                    continue  # the item's evidence says how many receipts there are
                target = f"receipts/{request_id}.json"
                (folder / target).write_text(receipt, encoding="utf-8")
                described[target] = f"request {request_id} proven into a signed tree head"
        exported = verify_export(folder / "export.jsonl", keys.record, keys.integrator)
        facts = gather(auditing, since, until, verified, exported)
        retention = retention_section(auditing, since, until)
        facts.files = dict(described)
        items = [
            {"key": i.key, "asks": i.asks, "source": i.source, **i.check(facts)._asdict()}
            for i in regime.items
        ]
        digests = {n: _sha256(folder / n) for n in described}
        recorded = record_pack(
            auditing,
            reviewer=name,
            data={
                "regime": regime.key,
                "from": first_day.isoformat(),
                "to": last_day.isoformat(),
                "items": {i["key"]: i["status"] for i in items},
                "files": digests,
            },
        )
    summary = {
        "format": "compliance-gateway evidence pack v1",
        "regime": {
            "key": regime.key,
            "title": regime.title,
            "summary": regime.summary,
            "sources": list(regime.sources),
        },
        "period": {"from": first_day.isoformat(), "to": last_day.isoformat()},
        "built_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "built_by": name,
        "store_id": recorded.store_id,
        "recorded_seq": recorded.seq,
        "items": items,
        "counts": {s: facts.statuses[s] for s in CALLS},
        "retention": retention,
        "files": {n: {"what": described[n], "sha256": digests[n]} for n in described},
        "check_commands": _commands(described),
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (folder / "index.html").write_text(summary_html(summary), encoding="utf-8")
    return PackResult(folder, recorded.seq, summary)


def _commands(described: dict[str, str]) -> list[str]:
    run = f"python {VERIFIER}"
    commands = [f"{run} export export.jsonl --keys public-keys.json"]
    if "checkpoint.json" in described:
        commands.append(f"{run} checkpoint checkpoint.json --keys public-keys.json")
    commands += [
        f"{run} receipt {n} --keys public-keys.json" for n in described if n.startswith("receipts/")
    ]
    return commands
