"""Owned retries are recorded attempt by attempt; JSON answers are checked and flagged."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway import Gateway, OutputValidationError, UpstreamRejected, UpstreamUnavailable
from gateway.providers.local import LocalRequestError
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway, events, kinds, payload_text

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
    # The upstream's words may quote the prompt: content, in a payload, never in the data.
    assert payload_text(db_path, attempt, "upstream_message") == "max_tokens: ideas are too long"
    assert "ideas" not in json.dumps(attempt.data)
    assert attempt.data["upstream_message_bytes"] == len("max_tokens: ideas are too long")
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


# A provider that fails after the intent is recorded still gets an outcome: a body it cannot
# honour (the local model reads no images), and a failure its boundary did not foresee.

# A PNG's signature, then caller bytes whose base64 spells a marker the refusal quotes.
QUOTED_INPUT = "SECRETINPUT0"
IMAGE_DATA = "iVBORw0KGgoA" + QUOTED_INPUT


def test_a_body_the_local_model_cannot_honour_is_recorded_failed_without_quoting_it(
    make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    policy = policy_dir / "offline_demo.toml"
    policy.write_text(
        policy.read_text() + "\n[input]\nimages = { max_bytes = 1000, max_count = 1 }\n"
    )
    gw = make_gateway()
    # Keys in this order so that the refusal's 80-character quote of the block reaches the data.
    image = {"source": {"data": IMAGE_DATA, "media_type": "image/png", "type": "base64"}}
    with pytest.raises(UpstreamRejected) as caught:
        gw.complete(
            "offline_demo", messages=[{"role": "user", "content": [{**image, "type": "image"}]}]
        )
    assert QUOTED_INPUT not in str(caught.value)
    assert LocalRequestError.summary in str(caught.value)
    assert caught.value.error_type == "local_request_error"
    assert kinds(db_path) == ["request", "failed"]
    failed = events(db_path)[-1]
    assert failed.data["error_type"] == "local_request_error"
    # The provider's words are kept, in the log, as content (a payload), not in the data.
    assert QUOTED_INPUT in payload_text(db_path, failed, "detail")
    assert QUOTED_INPUT not in json.dumps(failed.data)


class BrokenProvider:
    """Stands in for the local model and fails in a way no provider boundary foresees."""

    name = "local"

    def __init__(self, _settings: object) -> None:
        pass

    def model_version(self, model_id: str) -> str:
        return f"{model_id}@broken"

    def wire_bytes(self, body: object) -> bytes:
        return repr(body).encode()

    def send(self, body: object, *, on_wire: Callable[[bytes], None], **_: object) -> None:
        on_wire(self.wire_bytes(body))  # announced: the intent is committed
        raise RuntimeError("boom SECRET-INPUT")

    def close(self) -> None:
        return None


def test_an_unforeseen_provider_failure_after_the_intent_is_recorded_as_failed(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    gw = make_gateway(providers={"local": BrokenProvider})
    with pytest.raises(UpstreamRejected) as caught:
        gw.complete("offline_demo", "The reviewer")
    assert "SECRET-INPUT" not in str(caught.value)
    assert caught.value.error_type == "provider_error"
    assert kinds(db_path) == ["request", "failed"]
    failed = events(db_path)[-1]
    assert failed.data["error_type"] == "provider_error"
