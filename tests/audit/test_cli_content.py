"""`gateway audit show --content`: what was asked and answered, only from a record that checks
out, and every read itself recorded (an ACCESS event naming the reviewer)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind, StoredEvent
from audit.store.signing import Signer
from gateway import Settings
from gateway.cli import main
from gateway.keys import record_signer

RHASH = "sha256:" + "e" * 64
SYSTEM = "You review transactions.\nAnswer <verdict>PASS|ESCALATE|BLOCK</verdict>."
QUESTION = "Pay EUR 9,500 to \x1b[31mACME\x1b[0m\u202e"
ANSWER = "<verdict>ESCALATE</verdict>\n<reasons>Structuring below the threshold.</reasons>"


def _request_body() -> bytes:
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    return json.dumps(body).encode()


def _response_body() -> bytes:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": ANSWER}],
    }
    return json.dumps(body).encode()


def _record(store: AuditStore, rid: str) -> None:
    store.append(
        EventDraft(
            kind=EventKind.REQUEST, request_id=rid, task="compliance_review", caller="svc",
            policy_fingerprint="sha256:" + "f" * 64, request_hash=RHASH,
            payloads={"request_body": _request_body()},
        )
    )  # fmt: skip
    store.append(
        EventDraft(
            kind=EventKind.RESPONSE, request_id=rid, task="compliance_review", caller="svc",
            policy_fingerprint="sha256:" + "f" * 64, request_hash=RHASH,
            data={"ok": True, "model": "claude-sonnet-4-6", "latency_ms": 812.5,
                  "usage": {"input_tokens": 40, "output_tokens": 12}},
            payloads={"response_body": _response_body()},
        )
    )  # fmt: skip


@pytest.fixture
def log(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "audit.db"
    url = f"sqlite:///{path}"
    signer = record_signer(Settings(database_url=url), create=True)
    with AuditStore.open(url, signer=signer) as store:
        _record(store, "r-1")
        served = store.events_for_request("r-1")[-1]
        store.append(
            EventDraft(
                kind=EventKind.CACHE_HIT, request_id="r-hit", task="compliance_review",
                caller="svc", request_hash=RHASH,
                data={"served_seq": served.seq, "served_hash": served.hash,
                      "served_request_id": "r-1"},
            )
        )  # fmt: skip
        store.append(
            EventDraft(kind=EventKind.REJECTED, request_id="r-rejected", task="compliance_review")
        )
    return url, path


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": url})


def _accesses(url: str) -> list[StoredEvent]:
    with AuditStore.open(url) as store:
        return list(store.iter_events(kind=EventKind.ACCESS))


def test_content_is_shown_escaped_and_the_read_is_recorded(log: tuple[str, Path]) -> None:
    url, _ = log
    result = run(url, "audit", "show", "r-1", "--content", "--reviewer", "a.auditor")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "You review transactions." in out and "Answer <verdict>" in out
    assert "Structuring below the threshold." in out
    # The terminal never receives the escape sequence or the bidi override, only their names.
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[31mACME\\x1b[0m\\u202e" in out
    [access] = _accesses(url)
    assert access.caller == "a.auditor"
    assert access.data["reviewer"] == "a.auditor"
    assert access.data["read_request_id"] == "r-1"
    assert access.data["read"] == ["system_prompt", "messages", "answer"]
    assert access.data["shown"] is True
    assert f"recorded as seq {access.seq}" in out
    # Who has looked at it since: the next show names the reader.
    again = run(url, "audit", "show", "r-1").output
    assert "content read by:" in again and "a.auditor" in again


def test_json_content_keeps_exact_values(log: tuple[str, Path]) -> None:
    url, _ = log
    result = run(url, "audit", "show", "r-1", "--content", "--reviewer", "a.auditor", "--format",
                 "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    content = json.loads(result.output)["content"]
    assert content["system"] == SYSTEM
    assert content["messages"] == [{"role": "user", "content": QUESTION}]
    assert content["answer"] == ANSWER
    assert content["model"] == "claude-sonnet-4-6"
    assert content["access_seq"] == _accesses(url)[0].seq


def test_a_cache_hit_shows_the_answer_it_served(log: tuple[str, Path]) -> None:
    url, _ = log
    result = run(url, "audit", "show", "r-hit", "--content", "--reviewer", "a.auditor",
                 "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    content = json.loads(result.output)["content"]
    assert content["served_from"] == "r-1" and content["answer"] == ANSWER
    assert content["outcome"] == "cache_hit"


def test_content_needs_a_reviewer_and_records_nothing_without_one(log: tuple[str, Path]) -> None:
    url, _ = log
    result = run(url, "audit", "show", "r-1", "--content")
    assert result.exit_code == 2 and "--reviewer" in result.output
    assert SYSTEM.splitlines()[0] not in result.output
    assert run(url, "audit", "show", "r-1", "--reviewer", "x").exit_code == 2
    assert _accesses(url) == []


def test_a_reviewer_name_with_control_characters_is_refused(log: tuple[str, Path]) -> None:
    url, _ = log
    result = run(url, "audit", "show", "r-1", "--content", "--reviewer", "eve\x1b[2K")
    assert result.exit_code == 2
    assert _accesses(url) == []


def test_a_forged_answer_is_refused_with_the_reason_and_nothing_shown(
    log: tuple[str, Path],
) -> None:
    url, _ = log
    # A database writer without the record key appends a well-linked answer of its own.
    forger = Signer.generate()
    with AuditStore.open(url, signer=forger) as store:
        _record(store, "r-forged")
    result = run(url, "audit", "show", "r-forged", "--content", "--reviewer", "a.auditor")
    assert result.exit_code == 4
    assert "not a trusted key" in result.output
    assert "Structuring" not in result.output and "You review" not in result.output
    [access] = _accesses(url)
    assert access.data["shown"] is False and access.data["read_request_id"] == "r-forged"
    assert any("not a trusted key" in p for p in access.data["problems"])


def test_an_altered_payload_is_refused(log: tuple[str, Path]) -> None:
    url, path = log
    with sqlite3.connect(path) as conn:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("UPDATE payloads SET content = replace(content, 'ESCALATE', 'PASS')")
    result = run(url, "audit", "show", "r-1", "--content", "--reviewer", "a.auditor")
    assert result.exit_code == 4
    assert "Structuring" not in result.output
    assert _accesses(url)[0].data["shown"] is False


def test_a_request_with_nothing_sent_has_no_content(log: tuple[str, Path]) -> None:
    url, _ = log
    result = run(url, "audit", "show", "r-rejected", "--content", "--reviewer", "a.auditor")
    assert result.exit_code == 2 and "no recorded content" in result.output


def test_reads_keep_the_log_intact(log: tuple[str, Path]) -> None:
    url, _ = log
    run(url, "audit", "show", "r-1", "--content", "--reviewer", "a.auditor")
    assert run(url, "audit", "verify").exit_code == 0
