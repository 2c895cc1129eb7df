"""The replay cache: identical requests get the recorded answer; the key is exact."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gateway import Gateway
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway, events

PROMPT = "Transaction: pay 250 GBP to Example Ltd"


def test_a_replay_policy_serves_the_recorded_answer_and_records_the_hit(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    first = gw.complete("compliance_review", PROMPT, caller="payments-svc")
    fake_api.script(Reply.ok(text="a different answer"))
    second = gw.complete("compliance_review", PROMPT, caller="payments-svc")

    assert len(fake_api.requests) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text
    assert second.request_hash == first.request_hash
    assert second.request_id != first.request_id
    [hit] = [e for e in events(db_path) if e.request_id == second.request_id]
    assert str(hit.kind) == "cache_hit"
    assert hit.data["served_seq"] == first.seq
    assert second.seq == hit.seq


def test_a_record_policy_always_calls_and_records(gw: Gateway, fake_api: FakeMessagesAPI) -> None:
    a = gw.complete("quant_strategy", "FX momentum")
    b = gw.complete("quant_strategy", "FX momentum")
    assert len(fake_api.requests) == 2
    assert not a.cached and not b.cached
    assert a.seq != b.seq


def test_the_cache_survives_a_new_gateway_instance(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI
) -> None:
    make_gateway().complete("compliance_review", PROMPT)
    result = make_gateway().complete("compliance_review", PROMPT)
    assert result.cached
    assert len(fake_api.requests) == 1


def test_concurrent_identical_requests_make_one_upstream_call(
    gw: Gateway, fake_api: FakeMessagesAPI
) -> None:
    fake_api.set_default(lambda request: Reply.slow(0.2, then=Reply.ok()))
    results = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            results.append(gw.complete("compliance_review", PROMPT))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(fake_api.requests) == 1
    assert sorted(r.cached for r in results) == [False] + [True] * 7
    assert len({r.text for r in results}) == 1


# -- the key is immune to how a request is spelled ------------------------------------------


def test_key_ignores_override_order_and_integer_versus_float(gw: Gateway) -> None:
    a = gw.complete("quant_strategy", "x", overrides={"temperature": 1, "max_tokens": 600})
    b = gw.complete("quant_strategy", "x", overrides={"max_tokens": 600, "temperature": 1.0})
    assert a.request_hash == b.request_hash


def test_key_ignores_prompt_versus_equivalent_messages(gw: Gateway) -> None:
    a = gw.complete("compliance_review", PROMPT)
    b = gw.complete("compliance_review", messages=[{"content": PROMPT, "role": "user"}])
    assert a.request_hash == b.request_hash
    assert b.cached


# -- and changes with everything that changes behaviour --------------------------------------


def test_key_changes_with_any_parameter(gw: Gateway) -> None:
    a = gw.complete("compliance_review", PROMPT, overrides={"max_tokens": 512})
    b = gw.complete("compliance_review", PROMPT, overrides={"max_tokens": 513})
    c = gw.complete("compliance_review", PROMPT + " ")
    assert len({a.request_hash, b.request_hash, c.request_hash}) == 3
    assert not b.cached and not c.cached


def test_key_changes_with_the_system_prompt(
    make_gateway: MakeGateway, policy_dir: Path, fake_api: FakeMessagesAPI
) -> None:
    before = make_gateway().complete("compliance_review", PROMPT)
    prompt_file = policy_dir / "prompts" / "compliance_review.md"
    prompt_file.write_text(prompt_file.read_text() + "\nAlso check sanctions lists.\n")
    after = make_gateway().complete("compliance_review", PROMPT)
    assert after.request_hash != before.request_hash
    assert not after.cached
    assert len(fake_api.requests) == 2


def test_key_changes_with_the_schema(
    make_gateway: MakeGateway, policy_dir: Path, fake_api: FakeMessagesAPI
) -> None:
    valid = '{"counterparty": "ACME", "amount": 1, "currency": "EUR", "value_date": "2026-12-01"}'
    fake_api.set_default(lambda request: Reply.ok(json_text=valid))
    before = make_gateway().complete("json_extraction", "Confirm: ACME 1 EUR")
    schema = policy_dir / "schemas" / "trade_confirmation.json"
    schema.write_text(schema.read_text().replace('"amount": {', '"amount": {"minimum": 0, '))
    after = make_gateway().complete("json_extraction", "Confirm: ACME 1 EUR")
    assert after.request_hash != before.request_hash
    assert not after.cached


@pytest.mark.parametrize(
    ("field", "old", "new"),
    [
        ("model", 'id = "claude-sonnet-4-6"', 'id = "claude-opus-4-6"'),
        ("api version", 'id = "claude-sonnet-4-6"', 'id = "claude-sonnet-4-6-api-next"'),
    ],
)
def test_key_changes_with_the_model_and_the_api_version(
    make_gateway: MakeGateway,
    policy_dir: Path,
    tmp_path: Path,
    field: str,
    old: str,
    new: str,
) -> None:
    # The "api version" case: a catalog override adds a model entry identical to sonnet-4-6
    # except for its api_version, so only the version differs between the two requests.
    override = tmp_path / "catalog.toml"
    override.write_text(_sonnet_on_next_api())
    before = make_gateway(catalog_override=override).complete("compliance_review", PROMPT)
    path = policy_dir / "compliance_review.toml"
    path.write_text(path.read_text().replace(old, new))
    after = make_gateway(catalog_override=override).complete("compliance_review", PROMPT)
    assert after.request_hash != before.request_hash, field
    assert not after.cached


def _sonnet_on_next_api() -> str:
    from gateway.catalog import Catalog

    sonnet = Catalog.load().get("claude-sonnet-4-6")
    assert sonnet is not None
    fields = sonnet.model_dump(mode="json", exclude={"id"})
    fields["api_version"] = "2023-06-01-next"
    lines = ['[models."claude-sonnet-4-6-api-next"]']
    for key, value in fields.items():
        if value is None:
            continue
        lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)
