"""Verify's fast paths change no verdict: orjson parsing, signatures checked in worker
processes, recorded_at compared as stored text."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import audit.store as store_module
from audit import AuditStore, DefectKind, EventDraft, EventKind
from audit._bounded import loads as bounded_loads
from audit.chain import (
    BODY_VERSION,
    _parse_any,
    _parse_ordinary,
    content_refs,
    parse_body,
    parse_time,
)
from audit.signing import Signer, Trust, TrustedKeys


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


def test_signatures_checked_in_worker_processes_find_what_inline_checks_find(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signer, other = Signer.from_text("11" * 32), Signer.from_text("22" * 32)
    url = _log(tmp_path / "a.db", signer)
    with AuditStore.open(url, "os", signer=other) as store:  # an untrusted writer
        store.append(EventDraft(kind=EventKind.EXPORT, request_id="forged"))
    with sqlite3.connect(tmp_path / "a.db") as raw:
        triggers = raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
        for (name,) in list(triggers):
            raw.execute(f"DROP TRIGGER {name}")
        raw.execute("UPDATE events SET signature = NULL, key_id = NULL WHERE seq = 5")
        raw.execute("UPDATE events SET signature = substr(signature, 2) || 'A' WHERE seq = 9")
    trust = Trust(TrustedKeys.of([signer.public_key]), allow_unsigned_before=3)
    with AuditStore.open(url, "os") as store:
        inline = store.verify(trust=trust)
        monkeypatch.setattr(store_module, "POOL_FROM", 1)
        monkeypatch.setattr(store_module, "PAGE", 4)  # several pages, each a page ahead
        pooled = store.verify(trust=trust)
    assert pooled == inline
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
        report = store.verify()
    assert [(d.seq, d.kind) for d in report.defects] == [(3, DefectKind.COLUMN_MISMATCH)]
