"""Token counting: the planned request (the policy's system prompt and tools) through the
provider's counting endpoint; not a model call, recorded as a TOKEN_COUNT disclosure."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import EventKind
from gateway import Gateway
from gateway.errors import InputError, PolicyViolation, UpstreamRejected
from gateway.providers.local import LocalProvider, tokenize
from tests.answer.conftest import count_tokens
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway, events

PROMPT = "Transaction: EUR 9,900 from Jane Roe to ACME Shipping Ltd."


def test_a_count_goes_to_the_counting_endpoint_with_the_policys_input(
    gw: Gateway, fake_api: FakeMessagesAPI
) -> None:
    counted = count_tokens(gw, "compliance_review", PROMPT, caller="payments-svc")
    (sent,) = fake_api.requests
    assert sent.path == "/v1/messages/count_tokens"
    assert sent.json is not None
    assert sent.json["model"] == "claude-sonnet-4-6"
    assert sent.json["messages"] == [{"role": "user", "content": PROMPT}]
    assert "compliance" in sent.json["system"].lower()  # the policy's system prompt
    # Output controls do not change the input's count, and the endpoint refuses them.
    assert not {"max_tokens", "stop_sequences", "temperature"} & set(sent.json)
    assert sent.headers["anthropic-version"] == "2023-06-01"
    # The fake counts words of the messages (the role among them) and of the system prompt.
    assert counted == 1 + len(PROMPT.split()) + len(sent.json["system"].split())


def test_a_count_is_recorded_as_a_disclosure_not_a_call(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    count_tokens(gw, "compliance_review", PROMPT, caller="payments-svc")
    (event,) = events(db_path)
    assert event.kind == EventKind.TOKEN_COUNT
    assert event.caller == "payments-svc"
    assert event.data["model_call"] is False
    assert event.data["model_id"] == "claude-sonnet-4-6"
    assert "request_body" in event.payload_digests
    assert "input_tokens" not in event.data  # an estimate, not evidence


def test_the_recorded_body_is_what_was_sent_to_count_not_what_a_call_sends(
    gw: Gateway, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    count_tokens(gw, "compliance_review", PROMPT)
    gw.complete("compliance_review", PROMPT)
    digests = {e.kind: e.payload_digests.get("request_body") for e in events(db_path)}
    # The count is sent the input fields only, so its record is another body than the call's
    # (tests/gateway/test_token_count_wire.py: byte for byte what the endpoint received).
    assert digests[EventKind.TOKEN_COUNT] != digests[EventKind.REQUEST]
    count_sent, call_sent = fake_api.requests
    assert count_sent.body != call_sent.body


def test_a_count_the_policy_refuses_is_recorded_rejected_and_nothing_is_sent(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    with pytest.raises(PolicyViolation):
        count_tokens(
            gw,
            "compliance_review",
            messages=[{"role": "user", "content": [image, {"type": "text", "text": "x"}]}],
        )
    with pytest.raises(InputError):
        count_tokens(gw, "compliance_review", "   ")
    assert fake_api.requests == []
    assert [e.kind for e in events(db_path)] == [EventKind.REJECTED, EventKind.REJECTED]


def test_a_count_refused_upstream_is_an_upstream_error_naming_the_request(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.error(400, message="bad"))
    with pytest.raises(UpstreamRejected) as caught:
        count_tokens(gw, "compliance_review", PROMPT)
    (event,) = events(db_path)
    assert caught.value.request_id == event.request_id
    assert caught.value.attempts == 1
    assert len(fake_api.requests) == 1  # a pre-flight check is not retried


def test_a_stream_only_task_can_still_be_counted(
    policy_dir: Path, make_gateway: MakeGateway, fake_api: FakeMessagesAPI
) -> None:
    path = policy_dir / "compliance_review.toml"
    text = path.read_text().replace('format = "text"', 'format = "text"\nstream = "must"')
    path.write_text(text, encoding="utf-8")
    assert count_tokens(make_gateway(), "compliance_review", PROMPT) > 0


def test_offline_counts_are_the_local_models_own_tokens(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI
) -> None:
    counted = count_tokens(make_gateway(offline=True), "offline_demo", "The reviewer reads the")
    assert fake_api.requests == []
    body = {
        "model": "local:ngram",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "The reviewer reads the"}],
    }
    assert LocalProvider().count_tokens(body, api_version="local-1") == 4
    assert counted >= len(tokenize("The reviewer reads the"))
