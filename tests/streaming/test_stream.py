"""Gateway.stream against the loopback fake over real server-sent events: every way a stream
can end leaves exactly one terminal record, with usage, and a log that verifies."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from gateway import Gateway, PolicyViolation, UpstreamError, UpstreamRejected
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.streaming.conftest import (
    events,
    kinds,
    partial_text,
    payload,
    terminal,
    text_of,
    verified,
)

TEXT = "alpha bravo charlie delta echo foxtrot golf hotel"
PROMPT = "Summarise the exposure of desk 7 to EUR rates"


def test_chunked_deltas_arrive_as_they_are_sent_and_the_response_is_recorded_assembled(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    # The fake sends each delta only once the one before has reached this loop: a stream
    # that was buffered to the end could not finish without the fake giving up on a wait.
    pacer = threading.Semaphore(0)
    fake_api.script(Reply.stream(TEXT, deltas=4, paced_by=pacer))
    with gw.stream("chat", PROMPT) as s:
        request_id = s.request_id
        assert kinds(db_path, request_id) == ["request"]  # the intent is committed on entry
        received = []
        for event in s:
            received.append(event)
            if event["type"] == "content_block_delta":
                pacer.release()
    assert text_of(received) == TEXT
    assert [e["type"] for e in received] == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 4,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert fake_api.unpaced == 0  # deltas came one by one, not at the end
    result = s.result
    assert result.text == TEXT and result.request_id == request_id and not result.cached
    assert result.usage["output_tokens"] == len(TEXT.split())
    end = terminal(db_path, request_id)
    assert str(end.kind) == "response" and end.seq == result.seq
    assert end.data["usage"]["output_tokens"] == len(TEXT.split())
    facts = end.data["stream"]
    assert facts["events"] == 9 and facts["events_digest"].startswith("sha256:")
    assert facts["first_token_ms"] is not None and facts["first_token_ms"] > 0
    recorded = json.loads(payload(db_path, end, "response_body"))  # what replay reads
    assert recorded["content"] == [{"type": "text", "text": TEXT}]
    request = events(db_path, request_id)[0]
    assert json.loads(payload(db_path, request, "request_body"))["stream"] is True
    assert request.data["stream"] is True
    assert fake_api.requests[0].body == payload(db_path, request, "request_body")
    verified(db_path)


def test_a_caller_that_stops_after_two_deltas_is_recorded_cancelled_with_the_partial_text(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=8, delay=0.05))
    seen = 0
    with gw.stream("chat", PROMPT) as s:
        for event in s:
            if event["type"] == "content_block_delta":
                seen += 1
                if seen == 2:
                    break
    end = terminal(db_path, s.request_id)
    assert str(end.kind) == "cancelled"
    assert end.data["reason"] == "closed" and end.data["answered"] is False
    assert partial_text(db_path, end) == "alpha bravo "
    assert end.data["partial"]["usage"]["input_tokens"] > 0  # the last usage seen
    assert fake_api.stream_closed(1) is True  # the upstream connection was closed
    with pytest.raises(RuntimeError):
        _ = s.result
    verified(db_path)


def test_an_exception_in_the_callers_loop_records_cancelled(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, delay=0.02))
    with pytest.raises(ZeroDivisionError), gw.stream("chat", PROMPT) as s:
        for _event in s:
            raise ZeroDivisionError
    assert str(terminal(db_path, s.request_id).kind) == "cancelled"
    verified(db_path)


def test_an_interrupt_mid_stream_records_cancelled_interrupted(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, delay=0.02))
    with pytest.raises(KeyboardInterrupt), gw.stream("chat", PROMPT) as s:
        for event in s:
            if event["type"] == "content_block_delta":
                raise KeyboardInterrupt
    end = terminal(db_path, s.request_id)
    assert end.data["reason"] == "interrupted"
    assert partial_text(db_path, end) == "alpha bravo "
    verified(db_path)


def test_an_error_event_mid_stream_raises_after_failed_is_recorded_and_is_not_retried(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, delay=0.02, error_after=2))
    received = []
    with pytest.raises(UpstreamError) as caught, gw.stream("chat", PROMPT) as s:
        for event in s:
            received.append(event)
    assert text_of(received) == "alpha bravo charlie delta "
    assert caught.value.error_type == "overloaded_error" and caught.value.status == 200
    assert caught.value.request_id == s.request_id
    assert kinds(db_path, s.request_id) == ["request", "attempt_failed", "failed"]
    attempt, end = events(db_path, s.request_id)[1:]
    assert attempt.data["will_retry"] is False  # part of the answer had reached the caller
    assert end.data["error_type"] == "overloaded_error"
    assert partial_text(db_path, end) == "alpha bravo charlie delta "
    assert len(fake_api.requests) == 1
    verified(db_path)


def test_a_dropped_connection_mid_stream_is_failed_with_the_partial_text(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, delay=0.02, drop_after=3))
    with pytest.raises(UpstreamError) as caught, gw.stream("chat", PROMPT) as s:
        for _event in s:
            pass
    assert caught.value.error_type == "truncated_response"
    end = terminal(db_path, s.request_id)
    assert str(end.kind) == "failed"
    assert partial_text(db_path, end) == "alpha bravo charlie delta echo foxtrot "
    assert len(fake_api.requests) == 1
    verified(db_path)


@pytest.mark.parametrize(
    ("stop_reason", "details"),
    [
        ("refusal", {"category": "cyber", "explanation": "Declined: desk 7 exposure to EUR"}),
        ("max_tokens", None),
    ],
)
def test_refusal_and_max_tokens_end_with_a_response_naming_the_stop_reason(
    gw: Gateway,
    fake_api: FakeMessagesAPI,
    db_path: Path,
    stop_reason: str,
    details: dict[str, str] | None,
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=3, stop_reason=stop_reason, stop_details=details))
    with gw.stream("chat", PROMPT) as s:
        received = list(s)
    assert received[-2]["delta"]["stop_reason"] == stop_reason
    assert s.result.stop_reason == stop_reason
    end = terminal(db_path, s.request_id)
    assert str(end.kind) == "response" and end.data["stop_reason"] == stop_reason
    if details is None:
        assert "stop_details" not in end.data
    else:
        # The explanation is the model's own words and may quote the prompt: the event names
        # it by length, the response_body payload keeps it whole.
        assert end.data["stop_details"] == {
            "category": "cyber",
            "explanation_chars": len(details["explanation"]),
        }
        assert details["explanation"].encode() not in end.body
        assert details["explanation"] in payload(db_path, end, "response_body").decode()
    verified(db_path)


def test_failures_before_the_first_event_are_retried_then_raise_from_the_with_line(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.error(529), Reply.stream(TEXT, deltas=2))
    with gw.stream("chat", PROMPT) as s:
        assert text_of(list(s)) == TEXT
    assert kinds(db_path, s.request_id) == ["request", "attempt_failed", "response"]
    fake_api.script(Reply.error(400))
    stream = gw.stream("chat", PROMPT)
    with pytest.raises(UpstreamRejected), stream:
        pytest.fail("the block is not entered")
    assert kinds(db_path, stream.request_id) == ["request", "attempt_failed", "failed"]
    verified(db_path)


def test_a_replay_hit_streams_the_recorded_message_and_stream_is_not_in_the_key(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4))
    with gw.stream("chat_replay", PROMPT) as first:
        live = list(first)
    with gw.stream("chat_replay", PROMPT) as second:
        replayed = list(second)
    assert second.cached and second.result.cached
    assert text_of(replayed) == text_of(live) == TEXT
    assert next(e["type"] for e in replayed) == "message_start"
    assert replayed[-2]["usage"] == live[-2]["usage"] | replayed[-2]["usage"]
    assert kinds(db_path, second.request_id) == ["cache_hit"]
    # The same request not streamed is the same key: served from the streamed recording.
    plain = gw.complete("chat_replay", PROMPT)
    assert plain.cached and plain.text == TEXT
    assert len(fake_api.requests) == 1
    verified(db_path)


def test_the_policy_decides_whether_a_task_may_stream(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    with pytest.raises(PolicyViolation, match="never"), gw.stream("chat_never", PROMPT):
        pass
    with pytest.raises(PolicyViolation, match="must"):
        gw.complete("chat_must", PROMPT)
    fake_api.script(Reply.stream(TEXT))
    with gw.stream("chat_must", PROMPT) as s:
        assert text_of(list(s)) == TEXT
    assert [str(e.kind) for e in events(db_path)].count("rejected") == 2
    assert len(fake_api.requests) == 1
    verified(db_path)


def test_a_timeout_is_recorded_in_the_intent_and_bounds_the_wait(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=2, first_delay=1.0))
    with pytest.raises(UpstreamError) as caught, gw.stream("chat", PROMPT, timeout=0.2) as s:
        list(s)
    request_id = str(caught.value.request_id)
    request = events(db_path, request_id)[0]
    assert request.data["timeout_s"] == 0.2
    assert str(terminal(db_path, request_id).kind) == "failed"
    verified(db_path)


def test_the_local_model_streams_token_by_token(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    with gw.stream("offline_demo", "The reviewer reads the") as s:
        received = list(s)
    deltas = [e for e in received if e["type"] == "content_block_delta"]
    assert len(deltas) >= 2 and text_of(received) == s.result.text
    assert deltas[0]["delta"]["text"].strip().count(" ") == 0  # one token per delta
    assert str(terminal(db_path, s.request_id).kind) == "response"
    assert fake_api.requests == []
    verified(db_path)


def test_nothing_but_ids_is_logged_for_a_stream(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4), Reply.stream(TEXT, deltas=4, delay=0.02))
    with capture_logs() as logs:
        with gw.stream("chat", PROMPT) as s:
            list(s)
        with gw.stream("chat", PROMPT) as s:
            next(iter(s))
    flat = json.dumps(logs, default=str)
    assert "alpha" not in flat and "EUR rates" not in flat
    assert any(entry.get("event") == "request_cancelled" for entry in logs)
