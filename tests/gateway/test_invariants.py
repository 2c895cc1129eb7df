"""DESIGN.md §3 invariants, each with a test that fails when it is broken."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from audit import AuditStore, EventKind
from audit.verify import verify_log
from gateway import (
    AuditWriteError,
    Gateway,
    InputError,
    PolicyLoadError,
    PolicyViolation,
    UnknownTask,
    UpstreamRejected,
)
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply
from tests.gateway.conftest import API_KEY, MakeGateway, events, kinds

PROMPT = "Transaction: wire 9,800 USD to a new beneficiary in a high-risk jurisdiction"


# 1. No upstream call without a committed REQUEST event.


def test_the_intent_is_committed_before_the_upstream_sees_the_request(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    seen_at_call: list[list[str]] = []

    def answer(request: RecordedRequest) -> Reply:
        # Read the log from a separate connection while the gateway waits for this answer.
        seen_at_call.append(kinds(db_path))
        return Reply.ok()

    fake_api.set_default(answer)
    gw.complete("compliance_review", PROMPT)
    assert seen_at_call == [["request"]]


def test_a_rejected_request_never_reaches_the_upstream(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    with pytest.raises(PolicyViolation) as caught:
        gw.complete("compliance_review", PROMPT, overrides={"temperature": 0.7})
    assert "temperature" in str(caught.value)
    assert fake_api.requests == []
    [rejected] = events(db_path)
    assert rejected.kind == EventKind.REJECTED
    assert rejected.data["key"] == "temperature"
    assert rejected.data["requested"] == {"temperature": 0.7}


# 2. No result without a committed RESPONSE or CACHE_HIT event.


def test_every_result_points_at_its_committed_record(gw: Gateway, db_path: Path) -> None:
    first = gw.complete("compliance_review", PROMPT)
    second = gw.complete("compliance_review", PROMPT)
    by_seq = {e.seq: e for e in events(db_path)}
    assert by_seq[first.seq].kind == EventKind.RESPONSE
    assert by_seq[second.seq].kind == EventKind.CACHE_HIT
    assert by_seq[first.seq].request_id == first.request_id


# 4. The policy wins; requested and effective values are both recorded.


def test_an_override_outside_the_range_names_the_key_and_the_range(gw: Gateway) -> None:
    with pytest.raises(PolicyViolation) as caught:
        gw.complete("compliance_review", PROMPT, overrides={"max_tokens": 100_000})
    assert caught.value.key == "max_tokens"
    assert "4096" in str(caught.value)


def test_an_allowed_override_is_applied_and_both_values_are_recorded(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    result = gw.complete("compliance_review", PROMPT, overrides={"max_tokens": 300})
    [sent] = fake_api.requests
    assert sent.json is not None and sent.json["max_tokens"] == 300
    [request] = [e for e in events(db_path) if e.request_id == result.request_id][:1]
    assert request.data["requested"] == {"max_tokens": 300}
    assert request.data["effective"]["max_tokens"] == 300


# 5. A policy its model cannot honour never loads.


def test_a_policy_its_model_cannot_honour_is_refused_and_nothing_is_sent(
    make_gateway: MakeGateway, policy_dir: Path, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    path = policy_dir / "risk_report.toml"
    path.write_text(
        path.read_text().replace('effort = "high"', 'effort = "high"\ntemperature = 0.0')
    )
    gw = make_gateway()
    with pytest.raises(PolicyLoadError) as caught:
        gw.complete("risk_report", "Portfolio: 60/40")
    assert "temperature" in str(caught.value)
    assert fake_api.requests == []
    assert kinds(db_path) == ["rejected"]
    # The other tasks still load and run.
    gw.complete("compliance_review", PROMPT)


def test_unknown_tasks_and_bad_input_are_typed_recorded_and_never_sent(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    with pytest.raises(UnknownTask) as caught:
        gw.complete("no_such_task", PROMPT)
    assert "compliance_review" in str(caught.value)
    for bad in ("", "   ", 42, None):
        with pytest.raises(InputError):
            gw.complete("compliance_review", bad)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        gw.complete("compliance_review", messages=[])
    with pytest.raises(InputError):
        gw.complete("compliance_review", PROMPT, caller="")
    assert fake_api.requests == []
    assert set(kinds(db_path)) == {"rejected"}


# 7. Secrets never reach the database or logs; prompt text never reaches the logs.


def test_the_key_and_the_prompt_stay_out_of_the_database_and_logs(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.error(500), Reply.ok(), Reply.error(400))
    with capture_logs() as logs:
        gw.complete("compliance_review", PROMPT)
        with pytest.raises(UpstreamRejected) as caught:
            gw.complete("quant_strategy", PROMPT)
        gw.complete("compliance_review", PROMPT)
    assert API_KEY not in str(caught.value)
    stored = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert API_KEY.encode() not in stored
    assert PROMPT.encode() in stored  # the log itself does keep the prompt
    rendered = repr(logs)
    assert API_KEY not in rendered
    assert "9,800" not in rendered and PROMPT not in rendered
    assert {entry["event"] for entry in logs} >= {"request_completed", "request_failed"}


def test_one_log_event_per_outcome_with_the_promised_fields(gw: Gateway) -> None:
    with capture_logs() as logs:
        result = gw.complete("compliance_review", PROMPT)
    [entry] = logs
    assert entry["event"] == "request_completed"
    assert entry["request_id"] == result.request_id
    assert entry["seq"] == result.seq
    assert set(entry) >= {"task", "cached", "latency_ms", "tokens", "attempts"}


def test_the_log_verifies_after_a_mixed_run(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.error(429, retry_after=0.01), Reply.ok(), Reply.error(400))
    gw.complete("compliance_review", PROMPT)
    with pytest.raises(UpstreamRejected):
        gw.complete("quant_strategy", PROMPT)
    with pytest.raises(PolicyViolation):
        gw.complete("quant_strategy", PROMPT, overrides={"temperature": 5})
    gw.complete("compliance_review", PROMPT)
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        report = verify_log(store)
    assert report.ok, report


# 1 and 2 under a locked database: fail closed on both sides of the call.


def _hold_write_lock(db_path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_a_locked_database_stops_the_request_before_the_upstream_call(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    gw = make_gateway(database_url=f"sqlite:///{db_path}?lock_timeout=0.3")
    holder = _hold_write_lock(db_path)
    try:
        with pytest.raises(AuditWriteError):
            gw.complete("compliance_review", PROMPT)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert fake_api.requests == []
    assert kinds(db_path) == []


def test_no_answer_is_returned_when_the_outcome_cannot_be_recorded(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    gw = make_gateway(database_url=f"sqlite:///{db_path}?lock_timeout=0.3")
    holders: list[sqlite3.Connection] = []

    def answer_then_lock(request: RecordedRequest) -> Reply:
        holders.append(_hold_write_lock(db_path))  # the outcome append will time out
        return Reply.ok(text="an answer nobody may see")

    fake_api.set_default(answer_then_lock)
    with pytest.raises(AuditWriteError) as caught:
        gw.complete("compliance_review", PROMPT)
    for holder in holders:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(fake_api.requests) == 1
    assert kinds(db_path) == ["request"]  # shows as incomplete, never as answered
    # Once the database is free again the gateway recovers; the log verifies.
    fake_api.set_default(lambda request: Reply.ok())
    assert gw.complete("compliance_review", PROMPT).text
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        assert verify_log(store).ok
    assert caught.value.request_id is not None
