"""A request body's base64 attachments stored once each, content-addressed; the body restored
byte for byte.

    payloads = stored_payloads("request_body", wire)
    # {"request_body": <wire with each attachment's base64 replaced by a marker>,
    #  "attachment.1": <the decoded PDF>, ...}
    wire == restored(store, event, "request_body")

An attachment is stored as its own payload, decoded: a 20 MB prospectus is 20 MB in the log,
not 27 MB of base64 inside the request body. The gateway's payloads are sealed under a
random salt each (audit.sealing), so the event's digest of an attachment is not the plain
digest its marker names; ``restored`` matches a marker to the event's own attachments by the
plain digest of their content (rows written before sealing are keyed by it directly).

The marker is the JSON string ``"\\u0000attachment:sha256:<hex of the decoded bytes>"``
written in place of the base64 string (its quotes included). It was chosen so that it cannot
be mistaken for sent content: a JSON text holds ``\\u0000attachment:`` only where a string
carries a NUL character followed by that word (or a caller typed that very escape), and a
body that holds it anywhere is stored whole, so every marker in a stored body is ours; and
read without restoring, the marker is no base64, so it cannot pass for some other file.

Exactness comes first: the substitution is on the wire bytes, only where the base64 text
is canonical (``b64encode(b64decode(s)) == s``, so re-encoding the stored bytes gives back
the very text sent), and it is undone at record time and compared with the wire; any doubt
and the body is stored as sent. The stored body's digest is what the event records (the
chain covers it and each attachment's digest), so ``restored`` of an intact record is the
wire, and a changed attachment row fails its content digest like any payload.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from audit import AuditStore, StoredEvent
from audit.canonical import digest
from audit.errors import NotFound
from gateway._attachments import attachment_blocks

__all__ = ["ATTACHMENT_PREFIX", "restore", "restored", "stored_payloads"]

ATTACHMENT_PREFIX = "attachment."  # payload names: attachment.1, attachment.2, ...
_MARK = b"\\u0000attachment:"
_MARKER = re.compile(rb'"\\u0000attachment:(sha256:[0-9a-f]{64})"')


def stored_payloads(name: str, wire: bytes) -> dict[str, bytes]:
    """The payloads that record ``wire`` under ``name``: the body with each canonical base64
    attachment replaced by its marker, and each distinct attachment as ``attachment.N``."""
    if b'"base64"' not in wire or _MARK in wire:
        return {name: wire}
    files: dict[str, bytes] = {}  # digest -> decoded bytes, in the order first sent
    body = wire
    for text in _base64_texts(wire):
        decoded = _canonical_decode(text)
        if decoded is None:
            continue  # stays inline: its stored bytes would not re-encode to this text
        quoted = b'"' + text.encode("ascii") + b'"'
        if quoted not in body:
            continue  # written with escapes (\/), say: left as sent
        ref = digest(decoded)
        files.setdefault(ref, decoded)
        body = body.replace(quoted, b'"' + _MARK + ref.encode("ascii") + b'"')
    if not files or restore(body, files.__getitem__) != wire:
        return {name: wire}
    payloads = {name: body}
    for n, content in enumerate(files.values(), start=1):
        payloads[f"{ATTACHMENT_PREFIX}{n}"] = content
    return payloads


def restore(stored: bytes, read: Callable[[str], bytes]) -> bytes:
    """``stored`` with each marker replaced by the base64 of the attachment ``read(digest)``
    returns (which raises if it cannot)."""
    if _MARK not in stored:
        return stored
    return _MARKER.sub(
        lambda m: b'"' + base64.b64encode(read(m.group(1).decode("ascii"))) + b'"', stored
    )


def restored(
    store: AuditStore,
    event: StoredEvent,
    name: str,
    prefetched: Mapping[str, bytes] | None = None,
) -> bytes:
    """The body ``event`` recorded as ``name``, exactly as sent: its attachments read back
    from the payloads the event references (``prefetched``, digest -> bytes already read and
    checked, first). Raises what :meth:`AuditStore.payload` raises (``NotFound``,
    ``ContentMismatch``), and ``NotFound`` for a marker the event does not reference."""
    known = prefetched or {}

    def read(ref: str) -> bytes:
        return known[ref] if ref in known else store.payload(ref)

    ref = event.payload_digests.get(name)
    if ref is None:
        raise NotFound(f"seq {event.seq} has no payload {name}.")
    referenced = {d for n, d in event.payload_digests.items() if n.startswith(ATTACHMENT_PREFIX)}
    if not referenced:
        # Stored whole (no attachment, or recorded before attachments were split out): a
        # marker-like text in it is content, not a marker.
        return read(ref)

    plain: dict[str, bytes] = {}

    def attachment(found: str) -> bytes:
        if found in referenced:  # recorded before sealing: the row's key is the marker's
            return read(found)
        # Sealed rows (audit.sealing) are keyed apart from the marker, which names the plain
        # digest of the file inside the (erasable) body: found among the event's own.
        if not plain:
            for ref in sorted(referenced):
                content = read(ref)
                plain.setdefault(digest(content), content)
        if found not in plain:
            raise NotFound(f"seq {event.seq}: {name} names attachment {found}, not its own.")
        return plain[found]

    return restore(read(ref), attachment)


def _base64_texts(wire: bytes) -> list[str]:
    """The base64 text of each image or document block with a base64 source."""
    try:
        body: Any = json.loads(wire)
    except ValueError:
        return []
    messages = body.get("messages") if isinstance(body, dict) else None
    texts = []
    for block in attachment_blocks(messages):
        source = block.get("source")
        if isinstance(source, Mapping) and source.get("type") == "base64":
            data = source.get("data")
            if isinstance(data, str) and data:
                texts.append(data)
    return texts


def _canonical_decode(text: str) -> bytes | None:
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return decoded if base64.b64encode(decoded).decode("ascii") == text else None
