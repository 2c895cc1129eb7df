"""Bounded JSON: what the store reads back from the database is parsed within limits.

    parsed = loads(row.body)     # UnreadableJSON (a ValueError), never a RecursionError
    check_draft(draft)           # InvalidEvent for a draft no reader could read back

The database is not trusted input: a reviewer may append an ``export`` event of its own
making, and whoever holds the SQLite file may write anything. ``json.loads`` recurses once
per level of nesting, so a body nested a few thousand levels deep (PostgreSQL's ``jsonb``
accepts it) would end every verify, list and export in a ``RecursionError``, for ever, as
the log is append-only. :func:`loads` counts the nesting before it parses and refuses deep or
oversized text with one typed error; the callers turn that into a ``bad_body`` defect or an
event whose data is shown as unreadable.

The append side is stricter than the read side (:func:`check_draft`), so that everything the
store writes, it can read: data nested at most :data:`MAX_DATA_DEPTH` levels (the event body
adds one), at most :data:`MAX_DATA_BYTES` canonical bytes, and no NUL character in a text
column or in the data (PostgreSQL's ``text`` and ``jsonb`` refuse NUL, SQLite stores it: one
store must not accept on one backend what the other refuses).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

import orjson

from audit.errors import InvalidEvent
from audit.store.models import EventDraft

MAX_DEPTH = 128  # levels of arrays and objects in a stored body or policy
MAX_BYTES = 16 * 1024 * 1024  # of a stored body or policy
MAX_DATA_DEPTH = MAX_DEPTH - 1  # an event's data sits one level inside its body
MAX_DATA_BYTES = 4 * 1024 * 1024  # canonical bytes of an event's data
TEXT_COLUMNS = ("request_id", "task", "caller", "policy_fingerprint", "request_hash")

# A JSON string, unrolled so that matching is linear: no character can be matched two ways.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class UnreadableJSON(ValueError):
    """Stored text that is not JSON within the limits (too deep, too large, not UTF-8, ...)."""


def nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text``, brackets in strings skipped.

    Linear in the length: the strings are cut out by one regular expression that cannot
    backtrack, then the running level over the remaining brackets is summed in C.
    """
    brackets = _BRACKETS.sub("", _STRING.sub("", text))
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets)), default=0))


def loads(data: bytes | str, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """``json.loads`` of UTF-8 ``data`` nested at most ``max_depth`` levels and at most
    ``max_bytes`` long; :class:`UnreadableJSON` otherwise (including any JSON error)."""
    if len(data) > max_bytes:
        raise UnreadableJSON(f"{len(data)} bytes, more than the {max_bytes} a reader accepts")
    try:
        text = data if isinstance(data, str) else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableJSON(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    # Fewer brackets than the limit cannot nest deeper than it: the common case costs two
    # counts in C and no scan.
    if text.count("[") + text.count("{") > max_depth:
        depth = nesting(text)
        if depth > max_depth:
            raise UnreadableJSON(f"nested {depth} levels deep, more than the {max_depth} allowed")
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise UnreadableJSON(str(exc)) from None


def fast_loads(data: bytes, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """:func:`loads` by orjson (several times faster), within the same bounds.

    Not a drop-in: orjson refuses some text ``json`` accepts (``NaN``, ``1e400``, a lone
    surrogate escape) and reads an integer beyond 64 bits as a float. A caller uses it only
    where it checks that neither can matter, and falls back to :func:`loads` (as
    audit.verify.body.parse_body does); :class:`UnreadableJSON` for anything refused.
    """
    if len(data) > max_bytes:
        raise UnreadableJSON(f"{len(data)} bytes, more than the {max_bytes} a reader accepts")
    if data.count(b"[") + data.count(b"{") > max_depth:
        return loads(data, max_depth=max_depth, max_bytes=max_bytes)  # it counts the nesting
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UnreadableJSON(str(exc)) from None


def _check_value(value: Any, what: str, max_depth: int) -> None:
    """Refuse ``value`` (a JSON-like tree) deeper than ``max_depth`` or holding NUL.

    Iterative, so a deep value is refused here rather than overflowing the stack of the
    canonicaliser after it.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)  # the exact types first: they spare the ABC check of Mapping
        if kind is str or isinstance(item, str):
            if "\x00" in item:
                raise InvalidEvent(
                    f"the event {what} contains a NUL character, which the audit database "
                    "cannot store.",
                    hint="Remove or escape NUL characters before recording.",
                )
            continue
        if kind is dict or isinstance(item, Mapping):
            children: list[Any] = [*item.keys(), *item.values()]
        elif kind is list or isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth + 1 > max_depth:
            raise InvalidEvent(
                f"the event {what} is nested more than {max_depth} levels deep, more than a "
                "reader of the audit log accepts.",
                hint="Record a flatter structure, or store it as a payload.",
            )
        stack.extend((child, depth + 1) for child in children)


def check_draft(draft: EventDraft) -> None:
    """Refuse, before the chain lock, a draft whose record could not be read back alike on
    every backend: NUL in a text column, a payload name or the data, or data (or policy
    content) nested deeper than a reader accepts. Raises :class:`InvalidEvent`."""
    for column in TEXT_COLUMNS:
        _check_value(getattr(draft, column), column, 0)
    _check_value(list(draft.payloads), "payload names", 1)
    _check_value(draft.data, "data", MAX_DATA_DEPTH)
    if draft.policy_content is not None:
        _check_value(draft.policy_content, "policy content", MAX_DEPTH)


def check_data_size(data: bytes) -> None:
    """Refuse canonical data larger than :data:`MAX_DATA_BYTES` (:class:`InvalidEvent`)."""
    if len(data) > MAX_DATA_BYTES:
        raise InvalidEvent(
            f"the event data is {len(data)} bytes, more than the {MAX_DATA_BYTES} an event "
            "body may hold.",
            hint="Store large content as a payload: only its digest goes into the body.",
        )
