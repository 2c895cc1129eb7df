"""How verify reads an event body: fast where it provably reads what ``json`` reads.

    parsed = parse_page(bodies)     # each an Ordinary (_ordinary_body), a dict, or why not
    parse_body(body)                # the dict (its time under ``_time``), or why it is not one
    referenced(parsed)              # the content digests they name

Three readers, each stepping aside for the next on anything it cannot read exactly as the
general one would: one typed msgspec decode (audit.verify._ordinary_body), orjson with the checks of
:func:`_parse_ordinary`, then :func:`_parse_any` (orjson where faithful, else bounded
``json``). tests/audit/test_fast_verify.py holds each to the general path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from audit.store.bounded import MAX_BYTES, MAX_DEPTH, fast_loads
from audit.store.bounded import loads as bounded_loads
from audit.store.chain import BODY_VERSION
from audit.verify._ordinary_body import Ordinary, read_ordinary
from audit.verify.lifecycle import NAMING_KINDS

_orjson_loads = orjson.loads


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time`; refuses any other spelling of the instant."""
    # fromisoformat is C and ~10x faster than strptime, which dominated verify's profile;
    # the length and "Z" checks keep it to the one fixed-width form format_time writes.
    if len(text) != 27 or text[-1] != "Z" or text[10] != "T":
        raise ValueError(f"recorded_at {text!r} is not YYYY-MM-DDTHH:MM:SS.ffffffZ")
    return datetime.fromisoformat(text[:-1]).replace(tzinfo=UTC)


def content_refs(parsed: Mapping[str, Any]) -> tuple[list[str], str | None]:
    payloads = parsed.get("payloads") or {}
    policy = parsed.get("policy_ref")
    return [str(d) for d in payloads.values()], str(policy) if policy is not None else None


# Kinds whose ``data`` verify reads (audit.verify.lifecycle): their bodies are parsed by ``json``.
_DATA_READ = NAMING_KINDS
# A body as verify's walk holds it: read fast (the usual), parsed to a dict, or why it is not
# an event body.
Parsed = Ordinary | dict[str, Any] | str


def parse_page(bodies: Iterable[bytes]) -> list[Parsed]:
    """Each body read for verify's walk: as the store writes them in one typed decode
    (audit.verify._ordinary_body), else :func:`parse_body`."""
    return [read_ordinary(body, BODY_VERSION, _DATA_READ) or parse_body(body) for body in bodies]


def parse_body(body: bytes) -> dict[str, Any] | str:
    """The parsed body (with its time under ``_time``), or why it is not an event body.

    Parsed by orjson when its result is the one ``json`` gives on every field verify reads,
    else by ``json`` (:func:`_faithful` says when; both within the same bounds), so the
    speed-up changes no verdict and no defect's wording.
    """
    fast = _parse_ordinary(body)
    return fast if fast is not None else _parse_any(body)


def _parse_ordinary(body: bytes) -> dict[str, Any] | None:
    """:func:`parse_body` of a body as the store writes them, in one function (verify's hot
    loop: this saves more than half its calls); None for anything else, which then takes
    the general path. Every test here is one :func:`_parse_any` makes, in the same order of
    precedence, so a body it accepts parses identically (tests/audit/test_fast_verify.py)."""
    if len(body) > MAX_BYTES or body.count(b"[") + body.count(b"{") > MAX_DEPTH:
        return None
    try:
        parsed = _orjson_loads(body)
    except ValueError:
        return None
    if type(parsed) is not dict:
        return None
    get = parsed.get
    text, kind, seq, version = get("recorded_at"), get("kind"), get("seq"), get("v")
    if (
        type(seq) is not int
        or type(text) is not str
        or type(kind) is not str
        or kind in _DATA_READ
        or type(version) is not int
        or version != BODY_VERSION
        or len(text) != 27
        or text[-1] != "Z"
        or text[10] != "T"
        or float in list(map(type, parsed.values()))  # no field of a body is a float
    ):
        return None
    payloads, policy = get("payloads"), get("policy_ref")
    if policy is not None and type(policy) is not str:
        return None
    refs: list[str] = []
    if payloads:
        if type(payloads) is not dict:
            return None
        refs = list(payloads.values())
        for value in refs:
            if type(value) is not str:
                return None
    try:
        # With its "Z", as one call (a tenth of the slice, parse and replace parse_time
        # makes): it reads the same instant whenever it reads one, and a text it refuses
        # (an offset before the "Z") goes to the general path, which decides.
        parsed["_time"] = datetime.fromisoformat(text)
    except ValueError:
        return None
    if policy:
        refs.append(policy)
    parsed["_refs"] = refs
    return parsed


def _parse_any(body: bytes) -> dict[str, Any] | str:
    try:
        fast = fast_loads(body)
    except ValueError:
        fast = None  # json decides: it accepts some text orjson refuses (NaN, 1e400, ...)
    parsed = fast if _faithful(fast) else None
    try:
        if parsed is None:
            parsed = bounded_loads(body)  # depth and size bounded: a stored body is untrusted
        if not isinstance(parsed, dict) or parsed.get("v") != BODY_VERSION:
            return "not a version 1 event body"
        parsed["_time"] = parse_time(parsed["recorded_at"])
        payloads, policy = content_refs(parsed)
        parsed["_refs"] = [*payloads, policy] if policy else payloads
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return parsed


def _faithful(parsed: object) -> bool:
    """Whether orjson's parse of a body can stand for ``json``'s.

    They accept the same texts except that orjson refuses some json accepts (then ``json``
    parses), and turns an integer beyond 64 bits into a float where json keeps the int. So
    the fields verify reads must have types where that cannot have happened: ``seq`` an
    int, ``recorded_at`` text, no other field a float (none is, in a body), payload digests
    and ``policy_ref`` text, and no ``data`` that verify reads (the kinds of
    :data:`_DATA_READ` take the ``json`` path). So every field but ``data`` is what json
    gives, and ``data`` is read only where it is json's.
    """
    if type(parsed) is not dict:
        return False
    if type(parsed.get("seq")) is not int or type(parsed.get("recorded_at")) is not str:
        return False
    if float in list(map(type, parsed.values())):  # no field of a body is a float
        return False
    policy = parsed.get("policy_ref")
    if policy is not None and type(policy) is not str:
        return False
    payloads = parsed.get("payloads")
    if payloads:
        if type(payloads) is not dict:
            return False
        for value in payloads.values():
            if type(value) is not str:
                return False
    kind = parsed.get("kind")
    return type(kind) is str and kind not in _DATA_READ


def _refs(parsed: Mapping[str, Any] | Ordinary) -> list[str]:
    """The content digests a parsed body references, payloads first (:func:`parse_body`
    keeps them under ``_refs``)."""
    if isinstance(parsed, Ordinary):
        return parsed.refs
    refs: list[str] | None = parsed.get("_refs")
    if refs is None:
        payloads, policy = content_refs(parsed)
        refs = [*payloads, policy] if policy else payloads
    return refs


def referenced(bodies: Iterable[Parsed]) -> set[str]:
    """Content digests the parsed bodies reference (unparseable bodies reference nothing)."""
    refs: set[str] = set()
    for parsed in bodies:
        if isinstance(parsed, str):
            continue
        refs.update(_refs(parsed))
    return refs


def newest_refs(bodies: Sequence[Parsed], events: int = 4) -> list[str]:
    """The content digests the last ``events`` parsed bodies reference (a page's newest
    payloads: audit.verify._read.ChainReader.content_digests reads the rest near them)."""
    return [
        ref for parsed in bodies[-events:] if not isinstance(parsed, str) for ref in _refs(parsed)
    ]
