"""The loopback fake itself: what it records and what it answers, over plain HTTP."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply


def post(fake: FakeMessagesAPI, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    host, port = fake.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        raw = json.dumps(body).encode()
        conn.request(
            "POST", "/v1/messages", raw, {"Content-Type": "application/json", "X-Mixed": "A"}
        )
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_records_raw_bytes_and_lower_cased_headers(fake_api: FakeMessagesAPI) -> None:
    status, headers, payload = post(fake_api, {"model": "claude-x", "messages": []})
    assert status == 200 and headers["request-id"] == "req_fake_1"
    [seen] = fake_api.requests
    assert seen.method == "POST" and seen.path == "/v1/messages"
    assert seen.headers["x-mixed"] == "A"
    assert seen.body == json.dumps({"model": "claude-x", "messages": []}).encode()
    assert seen.json == {"model": "claude-x", "messages": []}
    message = json.loads(payload)
    assert message["model"] == "claude-x" and message["usage"]["output_tokens"] > 0


def test_script_is_consumed_in_order_then_the_default_answers(fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.error(429, retry_after=1.5), Reply.ok(json_text='{"a": 1}'))

    def by_model(request: RecordedRequest) -> Reply:
        return Reply.ok(text=f"default for {request.json and request.json['model']}")

    fake_api.set_default(by_model)
    first = post(fake_api, {"model": "m"})
    second = post(fake_api, {"model": "m"})
    third = post(fake_api, {"model": "other"})
    assert first[0] == 429 and first[1]["retry-after"] == "1.5"
    assert json.loads(first[2])["error"]["type"] == "rate_limit_error"
    assert json.loads(second[2])["content"][0]["text"] == '{"a": 1}'
    assert json.loads(third[2])["content"][0]["text"] == "default for other"
    assert [r.json for r in fake_api.requests] == [
        {"model": "m"},
        {"model": "m"},
        {"model": "other"},
    ]


def test_stream_request_gets_server_sent_events(fake_api: FakeMessagesAPI) -> None:
    status, headers, payload = post(fake_api, {"model": "m", "stream": True})
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = [
        line.split(": ", 1)[1] for line in payload.decode().splitlines() if line.startswith("event")
    ]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_delta" in events


def test_stream_error_without_streaming_is_a_529(fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.stream_error())
    status, _, payload = post(fake_api, {"model": "m"})
    assert status == 529 and json.loads(payload)["error"]["type"] == "overloaded_error"


def test_truncated_promises_more_body_than_it_sends(fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.truncated())
    with pytest.raises(http.client.IncompleteRead) as caught:
        post(fake_api, {"model": "claude-x", "messages": []})
    assert len(caught.value.partial) > 0 and caught.value.expected
