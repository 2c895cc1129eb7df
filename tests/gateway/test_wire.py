"""What goes on the wire is what the policy mandates, and what is recorded is what went."""

from __future__ import annotations

import json
from pathlib import Path

from audit import AuditStore
from gateway import Gateway
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import API_KEY, events

SAMPLING = ("temperature", "top_p", "top_k")


def test_compliance_review_sends_temperature_zero_on_the_old_api_version(
    gw: Gateway, fake_api: FakeMessagesAPI
) -> None:
    gw.complete("compliance_review", "Transaction: pay 100 EUR to ACME", caller="payments-svc")
    [sent] = fake_api.requests
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.json is not None
    assert sent.json["temperature"] == 0
    assert sent.json["model"] == "claude-sonnet-4-6"
    assert sent.json["stop_sequences"] == ["</reasons>"]
    assert "compliance" in sent.json["system"].lower()


def test_a_current_model_task_sends_no_sampling_parameter_at_all(
    gw: Gateway, fake_api: FakeMessagesAPI
) -> None:
    gw.complete("risk_report", "Portfolio: 60/40", caller="risk-svc")
    [sent] = fake_api.requests
    assert sent.headers["anthropic-version"] == "2026-10-21"
    assert sent.json is not None
    assert not set(SAMPLING) & set(sent.json)
    assert sent.json["output_config"]["effort"] == "high"


def test_the_key_is_sent_as_bearer_and_only_there(gw: Gateway, fake_api: FakeMessagesAPI) -> None:
    gw.complete("risk_report", "Portfolio: 60/40")
    [sent] = fake_api.requests
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert API_KEY.encode() not in sent.body


def test_recorded_request_bytes_are_the_bytes_the_upstream_received(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    result = gw.complete("compliance_review", "Transaction: 1", caller="payments-svc")
    [sent] = fake_api.requests
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        [request, response] = store.events_for_request(result.request_id)
        assert store.payload(request.payload_digests["request_body"]) == sent.body
        assert store.payload(response.payload_digests["request_wire"]) == sent.body
        recorded = json.loads(store.payload(response.payload_digests["response_body"]))
    assert recorded["content"][0]["text"] == result.text
    assert response.data["upstream_request_id"].startswith("req_fake_")
    assert response.data["sent_as_recorded"] is True


def test_every_record_binds_the_policy_model_and_parameters(gw: Gateway, db_path: Path) -> None:
    result = gw.complete(
        "compliance_review", "Transaction: 2", caller="payments-svc", overrides={"max_tokens": 512}
    )
    request, response = (e for e in events(db_path) if e.request_id == result.request_id)
    assert request.policy_fingerprint == result.policy_fingerprint
    assert request.request_hash == result.request_hash
    assert request.caller == "payments-svc"
    assert request.data["api_version"] == "2023-06-01"
    assert request.data["model_id"] == "claude-sonnet-4-6"
    assert request.data["requested"] == {"max_tokens": 512}
    assert request.data["effective"]["max_tokens"] == 512
    assert request.data["effective"]["temperature"] == 0
    assert request.data["durability"] == "os"
    assert response.data["model"] == result.model
    assert response.data["usage"] == result.usage
    assert response.data["attempts"] == 1
