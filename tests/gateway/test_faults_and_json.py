"""Owned retries are recorded attempt by attempt; JSON answers are checked and flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway import Gateway, OutputValidationError, UpstreamRejected, UpstreamUnavailable
from gateway.providers.local import LocalRequestError
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway, events, kinds

VALID = '{"counterparty": "ACME", "amount": 1000.5, "currency": "EUR", "value_date": "2026-12-01"}'


def test_each_failed_attempt_is_recorded_once_then_the_response(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.error(429, retry_after=0.01), Reply.error(500), Reply.drop(), Reply.ok())
    result = gw.complete("quant_strategy", "ideas")
    assert kinds(db_path, result.request_id) == [
        "request",
        "attempt_failed",
        "attempt_failed",
        "attempt_failed",
        "response",
    ]
    failed = [e for e in events(db_path) if str(e.kind) == "attempt_failed"]
    assert [e.data["status"] for e in failed] == [429, 500, None]
    assert [e.data["attempt"] for e in failed] == [1, 2, 3]
    assert failed[0].data["upstream_request_id"].startswith("req_fake_")
    response = events(db_path)[-1]
    assert response.data["attempts"] == 4
    assert len(fake_api.requests) == 4


def test_a_non_retryable_error_is_typed_recorded_and_carries_the_request_id(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.error(400, message="max_tokens: ideas are too long"))
    with pytest.raises(UpstreamRejected) as caught:
        gw.complete("quant_strategy", "ideas")
    error = caught.value
    assert "ideas are too long" not in str(error)  # upstream text may quote the prompt
    attempt = next(e for e in events(db_path) if str(e.kind) == "attempt_failed")
    assert attempt.data["upstream_message"] == "max_tokens: ideas are too long"
    assert error.status == 400
    assert error.request_id is not None
    assert kinds(db_path, error.request_id) == ["request", "attempt_failed", "failed"]
    assert len(fake_api.requests) == 1


def test_exhausted_retries_end_in_one_failed_event_and_no_response(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    gw = make_gateway(max_attempts=3)
    fake_api.script(*[Reply.error(529)] * 3)
    with pytest.raises(UpstreamUnavailable) as caught:
        gw.complete("quant_strategy", "ideas")
    assert caught.value.attempts == 3
    assert kinds(db_path) == ["request"] + ["attempt_failed"] * 3 + ["failed"]


def test_a_json_answer_is_parsed_and_returned(gw: Gateway, fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.ok(json_text=VALID))
    result = gw.complete("json_extraction", "Confirm: ACME buys 1000.5 EUR value 2026-12-01")
    assert result.json == {
        "counterparty": "ACME",
        "amount": 1000.5,
        "currency": "EUR",
        "value_date": "2026-12-01",
    }
    [sent] = fake_api.requests
    assert sent.json is not None
    assert sent.json["output_config"]["format"]["type"] == "json_schema"


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        '{"counterparty": "ACME"}',
        VALID.replace('"EUR"', '"euro"'),
        '{"counterparty": "ACME", "amount": NaN, "currency": "EUR", "value_date": null}',
    ],
)
def test_an_invalid_json_answer_is_recorded_flagged_and_never_replayed(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path, answer: str
) -> None:
    fake_api.script(Reply.ok(json_text=answer), Reply.ok(json_text=VALID))
    with pytest.raises(OutputValidationError) as caught:
        gw.complete("json_extraction", "Confirm: ACME")
    assert answer not in str(caught.value)
    flagged = events(db_path)[-1]
    assert flagged.seq == caught.value.seq
    assert flagged.data["ok"] is False
    assert flagged.data["output_check"]["ok"] is False
    # The same request again is not served the flagged answer: it goes upstream.
    again = gw.complete("json_extraction", "Confirm: ACME")
    assert not again.cached
    assert len(fake_api.requests) == 2


# A provider that fails in a way the provider boundary did not foresee still gets an outcome.
# The local model cannot be made to fail through a reviewed policy (review refuses what it
# cannot honour), so this injects the fault at the provider's edge.


@pytest.mark.parametrize(
    ("fault", "error_type"),
    [
        (LocalRequestError("messages[0] holds 'SECRET-INPUT'"), "local_request_error"),
        (RuntimeError("boom"), "provider_error"),
    ],
)
def test_an_unforeseen_provider_failure_after_the_intent_is_recorded_as_failed(
    gw: Gateway,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: Exception,
    error_type: str,
) -> None:
    def fail(body: object, **_: object) -> None:
        raise fault

    monkeypatch.setattr(gw._core.providers.get("local"), "complete", fail)
    with pytest.raises(UpstreamRejected) as caught:
        gw.complete("offline_demo", "The reviewer")
    assert "SECRET-INPUT" not in str(caught.value)
    assert caught.value.error_type == error_type
    assert kinds(db_path) == ["request", "failed"]
    failed = events(db_path)[-1]
    assert failed.data["error_type"] == error_type
