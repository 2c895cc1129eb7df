"""Verify's fastest read of an event body: one typed decode of a body as the store writes it.

    ordinary = read_ordinary(row.body)    # an Ordinary, or None: parse_body decides
    ordinary.body.seq, ordinary.time, ordinary.refs

Verify reads every body of the log, and of a body it needs only the fields it checks: the
mirrored columns, ``seq``, ``recorded_at``, the content digests. msgspec decodes a body into
a struct of exactly the fields the store writes, checking every type in C, and skips
``data`` as raw JSON text (its syntax checked, no objects built): 1.9 µs a body here, where
parsing to a dict and checking types in Python took 3.25 (audit.verify.body._parse_ordinary).

It decides nothing on its own. It accepts only a body that :func:`audit.verify.body.parse_body`
parses to the same values on every field verify reads, and returns None for any other
(then parse_body decides, and verify's general path says what is wrong):

- the fields the store writes, each present once or more (the last one counts, as in
  ``json``), no other; every type exact (an ``int`` field refuses ``true`` and ``1.0``);
- nothing either parser refuses or reads differently: no lone surrogate, no NaN, no float
  in a field; ``data`` an object; the whole body nested at most ``MAX_DEPTH`` levels
  (counted conservatively, brackets in strings too), valid UTF-8 (msgspec checks only the
  JSON syntax of text it skips) and with no integer longer than ``json`` converts. These
  three are checked on the whole body, not on the ``data`` kept: a key given twice keeps its
  last value, and an earlier ``data`` was skipped unread (a review found it);
- not a kind whose ``data`` verify reads (those take ``json``: audit.verify.body._DATA_READ);
- ``recorded_at`` in the fixed-width form the store writes, read as one instant.

tests/audit/test_fast_verify.py holds it to parse_body on odd values in every field.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from typing import NamedTuple

import msgspec

from audit.store.bounded import MAX_BYTES, MAX_DEPTH


class StoredBody(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An event body's fields, as :class:`audit.store.chain.BodyTemplate` writes them."""

    caller: str | None
    data: msgspec.Raw
    durability: str
    event_id: str
    kind: str
    payloads: dict[str, str]
    policy_fingerprint: str | None
    policy_ref: str | None
    recorded_at: str
    request_hash: str | None
    request_id: str
    seq: int
    task: str | None
    v: int


class Ordinary(NamedTuple):
    body: StoredBody
    time: datetime  # recorded_at, read
    refs: list[str]  # content digests referenced: payloads first, then the policy


_decode = msgspec.json.Decoder(StoredBody).decode
# Ordinary(...) runs the NamedTuple's __new__, a Python function (0.4 µs a body here); the
# tuple's own constructor makes the same object.
_ordinary = tuple.__new__
_MAX_DIGITS = sys.get_int_max_str_digits() or 1 << 62  # 0: no limit
_LONG_NUMBER = re.compile(rb"[0-9]{%d}" % (min(_MAX_DIGITS, 1 << 30) + 1))


def read_ordinary(body: bytes, version: int, data_read: frozenset[str]) -> Ordinary | None:
    """The body read as :data:`StoredBody`, if it is one as the store writes them (module
    doc); ``version`` the body version verify reads, ``data_read`` the kinds whose ``data``
    it reads (those are not read here)."""
    if len(body) > MAX_BYTES:
        return None
    try:
        parsed = _decode(body)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if parsed.v != version or parsed.kind in data_read:
        return None
    data = bytes(parsed.data)
    # The whole body, not only the data kept: a key given twice keeps the last value, and
    # msgspec checked only the syntax of an earlier "data" it skipped.
    if data[:1] != b"{" or body.count(b"[") + body.count(b"{") > MAX_DEPTH:
        return None
    if not body.isascii() and not _utf8(body):
        return None  # msgspec checks only the syntax of raw text: json decodes it first
    if len(body) > _MAX_DIGITS and _LONG_NUMBER.search(body):
        return None  # an integer json refuses to convert (sys.get_int_max_str_digits)
    text = parsed.recorded_at
    if len(text) != 27 or text[-1] != "Z" or text[10] != "T":
        return None
    try:
        when = datetime.fromisoformat(text)  # as audit.verify.body._parse_ordinary reads it
    except ValueError:
        return None
    refs = list(parsed.payloads.values())
    if parsed.policy_ref:
        refs.append(parsed.policy_ref)
    return _ordinary(Ordinary, (parsed, when, refs))


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
