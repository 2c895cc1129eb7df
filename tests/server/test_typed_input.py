"""Bad input to `gateway serve` is a typed 400 naming what is wrong, never a 500, and what
the server logs of it is bounded: a lone surrogate in ``model``, two ``model`` keys in one
body, a ``model`` a megabyte long."""

from __future__ import annotations

import json
import time

import httpx2 as httpx
import pytest
from structlog.testing import capture_logs

from gateway.server._body import BodyError, parse_json_body
from tests.server.test_in_process import InProcessServer, fake, key, server, settings

__all__ = ["fake", "key", "server", "settings"]  # the in-process server's fixtures

MESSAGES = '[{"role": "user", "content": "Transaction: 7 EUR to ACME"}]'


def post(server: InProcessServer, key: str, body: bytes) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/v1/messages",
        content=body,
        headers={"x-api-key": key, "content-type": "application/json"},
        timeout=30,
    )


def test_a_lone_surrogate_in_model_is_a_400(server: InProcessServer, key: str) -> None:
    body = '{"model": "compliance_review\\ud800", "max_tokens": 1024, "messages": ' + MESSAGES + "}"
    answer = post(server, key, body.encode())
    assert answer.status_code == 400, answer.text
    assert "lone surrogate" in answer.json()["error"]["message"]


def test_two_model_keys_in_one_body_are_refused(server: InProcessServer, key: str) -> None:
    body = (
        '{"model": "general_assistant", "max_tokens": 1024, "messages": '
        + MESSAGES
        + ', "model": "compliance_review"}'
    )
    answer = post(server, key, body.encode())
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "'model'" in error["message"] and "more than once" in error["message"]


@pytest.mark.parametrize("where", ["top level", "nested"])
def test_duplicate_keys_anywhere_are_refused(server: InProcessServer, key: str, where: str) -> None:
    dup = '{"role": "user", "role": "assistant", "content": "x"}'
    messages = f"[{dup}]" if where == "nested" else MESSAGES
    extra = ', "max_tokens": 1' if where == "top level" else ""
    head = '{"model": "compliance_review", "max_tokens": 1024, "messages": '
    body = head + messages + extra + "}"
    answer = post(server, key, body.encode())
    assert answer.status_code == 400, answer.text
    assert "more than once" in answer.json()["error"]["message"]


def test_a_megabyte_model_is_a_typed_error_and_logged_bounded(
    server: InProcessServer, key: str
) -> None:
    body = json.dumps(
        {"model": "m" * 1_000_000, "max_tokens": 1024, "messages": json.loads(MESSAGES)}
    )
    with capture_logs() as logs:
        answer = post(server, key, body.encode())
        deadline = time.monotonic() + 10
        while not [e for e in logs if e.get("event") == "http_request"]:
            assert time.monotonic() < deadline, logs
            time.sleep(0.01)
    assert answer.status_code == 404, answer.text[:200]
    assert len(answer.content) < 4096
    [line] = [e for e in logs if e.get("event") == "http_request"]
    assert len(line["task"]) <= 200
    assert len(json.dumps(line, default=str)) < 2048


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "levels deep"),
        (b'{"a": ' * 65 + b"1" + b"}" * 65, "levels deep"),
        (b'{"a": 1, "b": {"c": 1, "c": 2}}', "'c' more than once"),
        (b'{"text": "\\udc00"}', "lone surrogate"),
        (b'["\\ud83d"]', "lone surrogate"),
        (b'{"x": "\xff"}', "not UTF-8"),
        (b'{"x": ', "not JSON"),
    ],
)
def test_a_body_outside_the_bounds_is_a_typed_error(body: bytes, says: str) -> None:
    with pytest.raises(BodyError, match=says):
        parse_json_body(body)


def test_a_body_within_the_bounds_parses() -> None:
    assert parse_json_body(b'{"text": "\\ud83d\\ude00", "a": [[{"b": 1}]]}') == {
        "text": "\U0001f600",
        "a": [[{"b": 1}]],
    }
    assert parse_json_body(b'{"a": ' * 63 + b"1" + b"}" * 63) is not None
