"""Verify's fast paths change no verdict: orjson parsing, signatures checked in worker
processes, recorded_at compared as stored text."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import AuditStore, DefectKind, EventDraft, EventKind
from audit.store.bounded import loads as bounded_loads
from audit.store.chain import MIRRORED
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify import verify_log
from audit.verify._ordinary_body import read_ordinary
from audit.verify._signature_pool import POOL_FROM
from audit.verify.body import (
    _DATA_READ,
    BODY_VERSION,
    _parse_any,
    _parse_ordinary,
    content_refs,
    parse_body,
    parse_time,
)


def _json_only(body: bytes) -> dict[str, Any] | str:
    """parse_body as it was before orjson: the reference."""
    try:
        parsed = bounded_loads(body)
        if not isinstance(parsed, dict) or parsed.get("v") != BODY_VERSION:
            return "not a version 1 event body"
        parsed["_time"] = parse_time(parsed["recorded_at"])
        content_refs(parsed)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return parsed


ODD_VALUES = st.sampled_from(
    [
        "1", "99999999999999999999999", "-9223372036854775809", "18446744073709551616",
        "1e400", "NaN", "-Infinity", '"\\ud800"', '"x"', "null", "1.0", "[]", "{}", "true",
    ]
)  # fmt: skip
FIELDS = ["seq", "recorded_at", "kind", "request_id", "payloads", "policy_ref", "v", "data"]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), ODD_VALUES, max_size=8), st.booleans())
def test_a_body_parses_to_what_json_alone_gives(fields: dict[str, str], valid: bool) -> None:
    base = {
        "v": "1",
        "seq": "7",
        "recorded_at": '"2026-11-30T12:00:00.123456Z"',
        "kind": '"request"',
        "request_id": '"r"',
        "payloads": '{"a":"sha256:00"}',
    }
    members = {**base, **fields} if valid else fields
    body = ("{" + ",".join(f'"{k}":{v}' for k, v in members.items()) + "}").encode()
    fast, reference = parse_body(body), _json_only(body)
    if isinstance(fast, dict) and isinstance(reference, dict):
        fast.pop("_refs")
        if fast.get("kind") not in ("cache_hit", "replay", "integrity_alert"):
            fast.pop("data", None), reference.pop("data", None)  # read only for those kinds
        assert json.dumps(fast, default=str) == json.dumps(reference, default=str)
        assert [type(v) for v in fast.values()] == [type(v) for v in reference.values()]
    else:
        assert fast == reference


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([*FIELDS, "policy_ref", "payloads"]),
        st.one_of(
            ODD_VALUES,
            st.sampled_from(
                [
                    '"2026-02-30T12:00:00.123456Z"', '"2026-11-30 12:00:00.123456Z"',
                    '"2026-11-30T12:00:00.123456+"', '"sha256:11"', '""', '{"b":1}',
                    '{"a":"sha256:01","b":"sha256:02"}', '"replay"', '"cache_hit"', "1",
                ]
            ),
        ),
        max_size=8,
    )
)  # fmt: skip
def test_the_ordinary_body_path_gives_what_the_general_path_gives(fields: dict[str, str]) -> None:
    """The one-function path for bodies as the store writes them (_parse_ordinary) either
    steps aside (None) or returns exactly the general path's result, content refs and time
    included."""
    base = {
        "v": "1", "seq": "7", "recorded_at": '"2026-11-30T12:00:00.123456Z"',
        "kind": '"request"', "request_id": '"r"', "payloads": '{"a":"sha256:00"}',
        "policy_ref": '"sha256:ff"',
    }  # fmt: skip
    body = ("{" + ",".join(f'"{k}":{v}' for k, v in {**base, **fields}.items()) + "}").encode()
    ordinary = _parse_ordinary(body)
    if ordinary is not None:
        general = _parse_any(body)
        assert isinstance(general, dict)
        assert ordinary == general
        assert [type(v) for v in ordinary.values()] == [type(v) for v in general.values()]


STORED = {
    "caller": '"svc"', "data": '{"n":1}', "durability": '"os"', "event_id": '"e1"',
    "kind": '"response"', "payloads": '{"request_body":"sha256:00"}',
    "policy_fingerprint": '"sha256:ab"', "policy_ref": '"sha256:ff"',
    "recorded_at": '"2026-11-30T12:00:00.123456Z"', "request_hash": '"sha256:cd"',
    "request_id": '"r"', "seq": "7", "task": '"t"', "v": "1",
}  # fmt: skip
DEEP = "[" * 127 + "]" * 127
TYPED_ODD = st.one_of(
    ODD_VALUES,
    st.sampled_from(
        [
            '{"a":' + DEEP + "}", '{"a":' + "[" * 120 + "]" * 120 + "}",
            "{" + '"a":{' * 130 + "}" * 131,
            '{"n":' + "9" * 5000 + "}", '{"n":1e400}', '{"s":"\\ud800"}', '{"n":NaN}',
            '"2026-02-30T12:00:00.123456Z"', '"2026-11-30T12:00:00.123456+"', '"cache_hit"',
            '"replay"', '{"a":1}', "{}", '"sha256:ee"', '"x\\u0000y"', '"caf\\u00e9"',
        ]
    ),
)  # fmt: skip


def _stored_body(
    fields: dict[str, str],
    repeated: Sequence[str] = (),
    earlier: Mapping[str, str] | None = None,
) -> bytes:
    """A body of the store's fields with ``fields`` put in; ``repeated`` keys given again at
    the end, and ``earlier`` ones given first with another value (the last one counts)."""
    members = [f'"{k}":{v}' for k, v in (earlier or {}).items()]
    members += [f'"{k}":{v}' for k, v in {**STORED, **fields}.items()]
    members += [f'"{k}":{fields.get(k, STORED[k])}' for k in repeated]  # a key given twice
    return ("{" + ",".join(members) + "}").encode("utf-8", "surrogatepass")


def _same_reading(body: bytes) -> None:
    """Whatever audit.verify._ordinary_body reads of ``body``, the general path parses the same on
    every field verify reads (or the typed read stepped aside)."""
    typed = read_ordinary(body, BODY_VERSION, _DATA_READ)
    if typed is None:
        return
    general = _parse_any(body)
    assert isinstance(general, dict), general
    reference = _json_only(body)
    assert isinstance(reference, dict), reference
    general.pop("data"), reference.pop("data")  # not read for these kinds (general's own rule)
    assert general == {**reference, "_refs": general["_refs"]}
    read = typed.body
    for name in (*MIRRORED, "seq", "recorded_at", "v"):
        assert getattr(read, name) == general.get(name)
        assert type(getattr(read, name)) is type(general.get(name))
    assert typed.time == general["_time"]
    assert typed.refs == general["_refs"]
    assert general["kind"] not in _DATA_READ


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(st.sampled_from([*STORED, "extra", "_time", "_refs"]), TYPED_ODD, max_size=2),
    st.lists(st.sampled_from(sorted(STORED)), max_size=2),
    st.dictionaries(st.sampled_from(sorted(STORED)), TYPED_ODD, max_size=2),
)
def test_the_typed_read_gives_what_the_general_path_gives(
    fields: dict[str, str], repeated: list[str], earlier: dict[str, str]
) -> None:
    """audit.verify._ordinary_body reads a body in one typed decode, or steps aside (None); what it
    reads is what the general path parses, so no verdict can differ: odd values in every
    field, data too deep, an integer json refuses, duplicated keys (the last counts, and an
    odd value given first must not slip through unread), fields the store does not write."""
    _same_reading(_stored_body(fields, repeated, earlier))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(STORED)), TYPED_ODD)
def test_a_key_given_first_with_an_odd_value_is_read_as_json_reads_it(key: str, first: str) -> None:
    """msgspec keeps a key's last value and skips an earlier ``data`` unread: the body is
    still one json reads (or the typed read steps aside)."""
    _same_reading(_stored_body({}, earlier={key: first}))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(st.text(max_size=3), JSON_VALUES, max_size=3),
    st.booleans(),
    st.integers(min_value=0, max_value=200),
    st.binary(min_size=1, max_size=2),
)
def test_the_typed_read_of_data_gives_what_json_gives(
    data: dict[str, Any], ascii_only: bool, where: int, planted: bytes
) -> None:
    """``data`` is skipped as raw text by the typed read: any text there, valid JSON or one
    with stray bytes planted in it, is read only when json reads the body too."""
    text = json.dumps(data, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    _same_reading(_stored_body({"data": "{}"}).replace(b'"data":{}', b'"data":' + text))
    at = where % (len(text) + 1)
    mangled = text[:at] + planted + text[at:]
    _same_reading(_stored_body({"data": "{}"}).replace(b'"data":{}', b'"data":' + mangled))


def test_the_typed_read_takes_the_bodies_the_store_writes() -> None:
    """Else the fast path would be dead code and verify as slow as before."""
    body = ("{" + ",".join(f'"{k}":{v}' for k, v in STORED.items()) + "}").encode()
    typed = read_ordinary(body, BODY_VERSION, _DATA_READ)
    assert typed is not None
    assert typed.refs == ["sha256:00", "sha256:ff"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_any_bytes_parse_as_json_alone_says(body: bytes) -> None:
    fast, reference = parse_body(body), _json_only(body)
    if isinstance(fast, dict):
        fast.pop("_refs")
    assert fast == reference


def _log(path: Path, signer: Signer, events: int = 30) -> str:
    url = f"sqlite:///{path}"
    with AuditStore.open(url, "os", signer=signer) as store:
        for n in range(events):
            store.append(EventDraft(kind=EventKind.EXPORT, request_id=f"e{n}"))
    return url


def _tampered_log(path: Path, signer: Signer, more: int = 0) -> str:
    """30 events of ``signer``, one of an untrusted writer (seq 31), ``more`` of ``signer``;
    then seq 5 loses its signature and seq 9's is altered."""
    url = _log(path, signer)
    with AuditStore.open(url, "os", signer=Signer.from_text("22" * 32)) as store:
        store.append(EventDraft(kind=EventKind.EXPORT, request_id="forged"))
    with AuditStore.open(url, "os", signer=signer) as store:
        for start in range(0, more, 5000):
            store.append_many(
                [
                    EventDraft(kind=EventKind.EXPORT, request_id=f"m{n}")
                    for n in range(start, min(more, start + 5000))
                ]
            )
    with sqlite3.connect(path) as raw:
        triggers = raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
        for (name,) in list(triggers):
            raw.execute(f"DROP TRIGGER {name}")
        raw.execute("UPDATE events SET signature = NULL, key_id = NULL WHERE seq = 5")
        raw.execute("UPDATE events SET signature = substr(signature, 2) || 'A' WHERE seq = 9")
    return url


@pytest.mark.slow  # a log large enough for the signature pool: 20,000 signed events
def test_signatures_checked_in_worker_processes_find_what_inline_checks_find(
    tmp_path: Path,
) -> None:
    signer = Signer.from_text("11" * 32)
    trust = Trust(TrustedKeys.of([signer.public_key]), allow_unsigned_before=3)
    # Below the pool's threshold, verify checks signatures in its own thread; from it on, in
    # worker processes a page ahead of the walk (jobs=1: no range walk).
    small = _tampered_log(tmp_path / "small.db", signer)
    large = _tampered_log(tmp_path / "large.db", signer, more=POOL_FROM)
    with AuditStore.open(small, "os") as store:
        inline = verify_log(store, trust=trust)
    with AuditStore.open(large, "os") as store:
        pooled = verify_log(store, trust=trust, jobs=1)
    assert pooled.events_checked == inline.events_checked + POOL_FROM
    assert pooled.defects == inline.defects and pooled.ok == inline.ok
    assert {(d.seq, d.kind) for d in pooled.defects} == {
        (5, DefectKind.UNSIGNED),
        (9, DefectKind.BAD_SIGNATURE),
        (31, DefectKind.UNTRUSTED_SIGNER),
    }


def test_another_spelling_of_the_same_instant_is_accepted_another_instant_is_not(
    tmp_path: Path,
) -> None:
    url = _log(tmp_path / "t.db", Signer.from_text("11" * 32), events=3)
    with sqlite3.connect(tmp_path / "t.db") as raw:
        for (name,) in list(raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")):
            raw.execute(f"DROP TRIGGER {name}")
        # SQLite's own text for the instant, without the store's microseconds
        raw.execute("UPDATE events SET recorded_at = substr(recorded_at, 1, 19) || '.000000' "
                    "WHERE seq = 1 AND substr(recorded_at, 21) = '000000'")  # fmt: skip
        raw.execute("UPDATE events SET recorded_at = replace(recorded_at, ' ', 'T') WHERE seq = 2")
        raw.execute("UPDATE events SET recorded_at = '2001-01-01 00:00:00.000000' WHERE seq = 3")
    with AuditStore.open(url, "os") as store:
        report = verify_log(store)
    assert [(d.seq, d.kind) for d in report.defects] == [(3, DefectKind.COLUMN_MISMATCH)]
