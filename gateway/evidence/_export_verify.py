"""Verify an exported slice of the audit log offline: the file and public keys, no database.

    report = verify_export(Path("audit.jsonl"), [auditor_key_hex])
    report.ok, report.defects

An export (``gateway audit export``, JSONL) carries each event's seq, prev_hash, hash, body,
record signature and key id, and its last record carries the signed EXPORT event that
recorded the export (``export_head``: the head it covers, how many events, a digest of their
hashes). For every record this checks:

- ``hash``: ``sha256(prev_hash || body) == hash``, the body is a version-1 event body of
  that seq, and its columns equal the body's fields (``column_mismatch``);
- ``signature``: the record signature checks out under one of the given keys;
- ``link``: a record that follows the previous seq links to its hash; an unfiltered export
  has no gap, starts at seq 1 and ends at the head its EXPORT event names;
- the slice: the EXPORT event (itself hashed, signed and column-checked) counts exactly these
  records and its digest is theirs, so a record dropped, added, changed or cut from the end
  fails.

An export of a format-2 log (its EXPORT event names ``sequenced_from`` and ``store_id``)
has its format-2 part checked as gateway.evidence says: each record on its own
(``hash = sha256(body)``, a signature naming the store id), its link, and the integrator
checkpoints it carries, against the integrator's public keys.

Content (``--with-content``) is not part of any hashed body: each item carries the signed
events and payloads it was read from, and is checked against the digests those events sign
(gateway/evidence/_export_content.py); the signed EXPORT event says whether the export holds
content, so an item removed or added is a defect too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from audit.reports.export import HEAD_KEY
from audit.store.bounded import UnreadableJSON
from audit.store.bounded import loads as bounded_loads
from audit.store.chain import MIRRORED, link_hash
from audit.store.models import SIGNED_EXPORT_COLUMNS, EventKind
from audit.store.sequenced import chain_link
from audit.store.signing import TrustedKeys, UnusableKey
from audit.verify.body import parse_body
from gateway.errors import InputError
from gateway.evidence._export_content import ContentChecks
from gateway.evidence._export_sequenced import Era, SequencedChecks

__all__ = ["ExportDefect", "ExportVerifyReport", "verify_export", "verify_records"]

MAX_LINE = 64 * 1024 * 1024  # one record, content included
MAX_DEFECTS = 1000


class ExportDefect(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    line: int
    seq: int | None
    kind: str  # bad_record, hash_mismatch, column_mismatch, bad_signature, ... (docs/audit.md)
    detail: str


class ExportVerifyReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    events_checked: int
    first_seq: int | None
    last_seq: int | None
    export_seq: int | None  # the EXPORT event that recorded the export
    upto_seq: int | None  # the head it covers
    reviewer: str | None
    filters: dict[str, Any]
    trusted_keys: tuple[str, ...]  # key ids
    defects: tuple[ExportDefect, ...]
    # A format-2 log: its first format-2 seq and store id (from the EXPORT event), the
    # integrator keys trusted (key ids), and what was checked with them; records without a
    # link were pending integration when exported.
    sequenced_from: int | None = None
    store_id: str | None = None
    integrator_keys: tuple[str, ...] = ()
    integrator_checkpoints_checked: int = 0
    checkpoint_roots_checked: int = 0
    voids_checked: int = 0
    pending_integration: int = 0
    # Content (--with-content): whether the signed EXPORT event says the export holds it, how
    # many REQUEST records must carry it and how many items were checked against their
    # signed digests.
    content_included: bool = False
    content_expected: int = 0
    content_checked: int = 0


class _Walk:
    def __init__(
        self,
        keys: TrustedKeys,
        integrators: TrustedKeys,
        era: Era,
        *,
        unfiltered: bool,
        with_content: bool,
    ) -> None:
        self.keys = keys
        self.sequenced = SequencedChecks(
            era, keys, integrators, unfiltered=unfiltered, defect=self.defect
        )
        self.content = ContentChecks(
            with_content, event=self.event, defect=self.defect, reported=lambda: self.reported
        )
        self.defects: list[ExportDefect] = []
        self.reported = 0
        self.digest = hashlib.sha256()  # audit.reports.export.rows_digest, kept as the walk goes
        self.count = 0
        self.first: int | None = None
        self.last: int | None = None
        self.last_hash: str | None = None
        self.gaps = 0

    def defect(self, line: int, seq: int | None, kind: str, detail: str) -> None:
        self.reported += 1
        if len(self.defects) < MAX_DEFECTS:
            self.defects.append(ExportDefect(line=line, seq=seq, kind=kind, detail=detail))

    def event(self, line: int, record: dict[str, Any], what: str = "") -> dict[str, Any]:
        """Check one event record on its own; returns its parsed body ({} if unreadable)."""
        missing = [c for c in SIGNED_EXPORT_COLUMNS if c not in record]
        seq = record.get("seq") if isinstance(record.get("seq"), int) else None
        if missing:
            self.defect(line, seq, "bad_record", f"{what}missing {', '.join(missing)}")
            return {}
        body_text, prev, stored = record["body"], record["prev_hash"], record["hash"]
        if not all(isinstance(v, str) for v in (body_text, prev, stored)):
            self.defect(line, seq, "bad_record", f"{what}body, prev_hash and hash must be text")
            return {}
        body = body_text.encode("utf-8")
        if not prev.isascii() or link_hash(prev, body) != stored:  # no hash is non-ASCII
            self.defect(line, seq, "hash_mismatch", f"{what}hash is not sha256(prev_hash || body)")
        parsed = parse_body(body)
        if isinstance(parsed, str):
            self.defect(line, seq, "bad_body", f"{what}body does not parse: {parsed}")
            return {}
        wrong = [c for c in (*MIRRORED, "seq", "recorded_at") if record.get(c) != parsed.get(c)]
        if wrong:
            self.defect(
                line, seq, "column_mismatch", f"{what}column(s) {', '.join(wrong)} differ from body"
            )
        self.sequenced.signature(line, record, seq, what)
        return parsed

    def row(self, line: int, record: dict[str, Any]) -> None:
        self.event(line, record)
        self.content.row(line, record)
        seq = record.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            return
        follows = self.last is not None and seq == self.last + 1
        if self.last is not None:
            if seq <= self.last:
                self.defect(line, seq, "sequence", f"seq {seq} does not follow seq {self.last}")
            elif (
                follows
                and not self.sequenced.sequenced(seq)  # its link is checked instead
                and record.get("prev_hash") != self.last_hash
            ):
                self.defect(line, seq, "broken_link", f"prev_hash is not seq {self.last}'s hash")
            elif seq > self.last + 1:
                self.gaps += 1
        if self.last is None or seq > self.last:
            self.sequenced.row(line, seq, record, follows)
        self.first = seq if self.first is None else self.first
        self.last, self.last_hash = seq, record.get("hash")
        self.count += 1
        self.digest.update(str(record.get("hash")).encode("utf-8") + b"\n")


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE:
                yield number, f"the line is over {MAX_LINE:,} bytes"
                continue
            try:
                value = bounded_loads(raw)
            except UnreadableJSON as exc:
                yield number, f"not JSON ({exc})"
                continue
            yield number, value if isinstance(value, dict) else "not a JSON object"


def _last_head(path: Path) -> dict[str, Any]:
    """The data of the EXPORT event on the file's last line ({} if none can be read): what
    the walk needs before the first record (a format-2 log's era and store id; the
    filters). Read again, and checked, when the walk reaches it."""
    last = b""
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                last = raw
    if not last or len(last) > MAX_LINE:
        return {}
    try:
        record = bounded_loads(last)
    except UnreadableJSON:
        return {}
    head = record.get(HEAD_KEY) if isinstance(record, dict) else None
    body = head.get("body") if isinstance(head, dict) else None
    parsed = parse_body(body.encode("utf-8")) if isinstance(body, str) else None
    data = parsed.get("data") if isinstance(parsed, dict) else None
    return data if isinstance(data, dict) else {}


def verify_records(
    path: Path, keys: TrustedKeys, integrators: TrustedKeys | None = None
) -> ExportVerifyReport:
    """Check an exported JSONL slice against ``keys`` (the public keys trusted to have written
    its events and its EXPORT event) and ``integrators`` (the format-2 integrator's, trusted
    on voids and integrator checkpoints only); see the module docstring for what is
    checked. ``OSError`` if the file cannot be read."""
    integrators = integrators or TrustedKeys()
    data = _last_head(path)
    era = Era.of_data(data)
    walk = _Walk(
        keys,
        integrators,
        era,
        unfiltered=not data.get("filters"),
        with_content=data.get("with_content") is True,
    )
    head: dict[str, Any] | None = None
    head_line = 0
    for number, record in _records(path):
        if isinstance(record, str):
            walk.defect(number, None, "bad_record", record)
            continue
        if head is not None:
            walk.defect(number, None, "bad_record", "a record follows the export_head record")
        found = record.pop(HEAD_KEY, None)
        if record:
            walk.row(number, record)
        if found is not None:
            head, head_line = (found if isinstance(found, dict) else {}), number
    walk.content.finish()
    export = _check_head(walk, head, head_line)
    return ExportVerifyReport(
        ok=not walk.defects,
        events_checked=walk.count,
        first_seq=walk.first,
        last_seq=walk.last,
        export_seq=export.get("seq"),
        upto_seq=export.get("upto_seq"),
        reviewer=export.get("caller"),
        filters=export.get("filters") or {},
        trusted_keys=tuple(k.key_id for k in keys),
        defects=tuple(walk.defects),
        sequenced_from=era.sequenced_from,
        store_id=era.store_id,
        integrator_keys=tuple(k.key_id for k in integrators),
        integrator_checkpoints_checked=walk.sequenced.checkpoints,
        checkpoint_roots_checked=walk.sequenced.roots,
        voids_checked=walk.sequenced.voids,
        pending_integration=walk.sequenced.pending,
        content_included=walk.content.declared,
        content_expected=walk.content.expected,
        content_checked=walk.content.checked,
    )


def _check_head(walk: _Walk, head: dict[str, Any] | None, line: int) -> dict[str, Any]:
    """The EXPORT event at the end: itself sound, and counting exactly the slice above it."""
    if head is None:
        walk.defect(
            0, None, "no_head", "the export has no export_head record: it may have been cut short"
        )
        return {}
    parsed = walk.event(line, head, what="export_head: ")
    seq = head.get("seq") if isinstance(head.get("seq"), int) else None
    found = parsed.get("data")
    data: dict[str, Any] = found if isinstance(found, dict) else {}
    if parsed and parsed.get("kind") != EventKind.EXPORT.value:
        walk.defect(line, seq, "bad_head", "export_head is not an EXPORT event")
        return {}
    upto, count, digest = data.get("upto_seq"), data.get("events"), data.get("rows_digest")
    filters = data.get("filters") if isinstance(data.get("filters"), dict) else {}
    if not isinstance(upto, int) or not isinstance(count, int) or not isinstance(digest, str):
        walk.defect(line, seq, "bad_head", "the EXPORT event records no head, count or digest")
        return {}
    if count != walk.count:
        walk.defect(
            line, seq, "slice_mismatch",
            f"the EXPORT event counts {count} events, the file holds {walk.count}",
        )  # fmt: skip
    elif "sha256:" + walk.digest.hexdigest() != digest:
        walk.defect(line, seq, "slice_mismatch", "the records' hashes are not the ones exported")
    if walk.last is not None and walk.last > upto:
        walk.defect(line, seq, "slice_mismatch", f"seq {walk.last} is after the head {upto}")
    if not filters:  # the whole log up to its head: seq 1 to upto, no gap, linked to the head
        if walk.count and (walk.first != 1 or walk.gaps or walk.last != upto):
            walk.defect(
                line, seq, "gap", f"an unfiltered export must hold seq 1 to {upto} without a gap"
            )
        if (
            seq == upto + 1
            and not walk.sequenced.sequenced(seq)  # a format-2 EXPORT event has no prev_hash
            and walk.last == upto
            and head.get("prev_hash") != walk.last_hash
        ):
            walk.defect(line, seq, "broken_link", f"the EXPORT event does not link to seq {upto}")
    link = head.get("link")
    if walk.sequenced.sequenced(seq) and link is not None:
        prev = head.get("link_prev")
        if not isinstance(prev, str) or link != chain_link(prev, str(head.get("hash"))):
            walk.defect(
                line, seq, "hash_mismatch", "export_head: its link is not sha256(link_prev ‖ hash)"
            )
    return {
        "seq": seq,
        "upto_seq": upto,
        "caller": parsed.get("caller"),
        "filters": filters,
    }


def verify_export(
    path: Path, public_keys: Sequence[str], integrator_public_keys: Sequence[str] = ()
) -> ExportVerifyReport:
    """Verify an exported JSONL slice offline (no database): every record's hash, columns,
    links and record signature under ``public_keys`` (hex), and that the signed EXPORT event
    at its end counts exactly these records (gateway/evidence/_export_verify.py); a format-2 log's
    voids and integrator checkpoints under ``integrator_public_keys``."""
    if not public_keys:
        raise InputError(
            "verifying an export needs the public key(s) of the gateway that wrote it.",
            hint="Pass --public-key FILE (the record key's public half, hex, one a line).",
        )
    try:
        keys = TrustedKeys.of(public_keys)
        integrators = TrustedKeys.of(integrator_public_keys)
    except UnusableKey as exc:
        raise InputError(f"a public key is not usable: {exc}") from None
    try:
        return verify_records(path, keys, integrators)
    except OSError as exc:
        raise InputError(f"cannot read the export {str(path)!r}: {exc.strerror}.") from None
