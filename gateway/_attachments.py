"""Each attachment of a planned request, as the REQUEST event records it.

    attachments(plan.body["messages"])
    # [{"message": 1, "block": 1, "type": "document", "source": "base64",
    #   "media_type": "application/pdf", "size": 48213, "digest": "sha256:..."}]

The digest is ``sha256`` of the decoded file, in the form the audit store names payloads by,
so the same file carries the same digest in every request that sends it, and a reviewer can
match it against the document the bank holds (``sha256sum prospectus.pdf``). The bytes
themselves are stored once, as their own payload (gateway._attachment_payloads), however
many requests send them. A URL source is recorded by its URL: the provider fetched it, so its
bytes are in no record.

Runs after the policy check (gateway.policy._content), which has already refused anything
malformed, oversized or not base64; so this only reads.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any

from audit.canonical import digest

__all__ = ["attachment_blocks", "attachments"]

_KINDS = ("image", "document")


def attachments(messages: object) -> list[dict[str, Any]]:
    """One entry per image or document block, in the order they are sent."""
    found: list[dict[str, Any]] = []
    if not isinstance(messages, list):
        return found
    for m, message in enumerate(messages, start=1):
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for b, block in _blocks(content):
            entry = _entry(block)
            if entry is not None:
                found.append({"message": m, "block": b, **entry})
    return found


def attachment_blocks(messages: object) -> Iterator[Mapping[str, Any]]:
    """Every image or document block of ``messages``, those in tool results included."""
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            yield from (block for _, block in _blocks(content) if block.get("type") in _KINDS)


def _blocks(content: list[Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The message's blocks, with the attachments a tool result carries under its own
    block's number."""
    for b, block in enumerate(content, start=1):
        if not isinstance(block, Mapping):
            continue
        yield b, block
        inner = block.get("content") if block.get("type") == "tool_result" else None
        if isinstance(inner, list):
            for nested in inner:
                if isinstance(nested, Mapping):
                    yield b, nested


def _entry(block: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    source = block.get("source")
    if kind not in _KINDS or not isinstance(source, Mapping):
        return None
    if source.get("type") == "url":
        return {"type": kind, "source": "url", "url": source.get("url")}
    data = source.get("data")
    if source.get("type") != "base64" or not isinstance(data, str):
        return None
    decoded = base64.b64decode(data)
    return {
        "type": kind,
        "source": "base64",
        "media_type": source.get("media_type"),
        "size": len(decoded),
        "digest": digest(decoded),
    }
