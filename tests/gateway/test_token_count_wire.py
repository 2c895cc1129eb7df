"""A token count records the bytes the counting endpoint was sent (DESIGN.md §3, invariant 3):
its input fields only, not the planned body a call would send, and committed from the request
the provider built, before it goes out."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore, EventKind
from gateway import AsyncGateway, Gateway, Settings
from gateway.catalog import Catalog
from gateway.errors import AuditWriteError, ConfigurationError
from gateway.policy import PolicySet
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.registry import Providers
from gateway.request import Recorder, RequestPipeline
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import API_KEY
from tests.gateway.test_unannounced_send import SkipsOnWire

PROMPT = "Transaction: EUR 9,900 from Jane Roe to ACME Shipping Ltd. Grüße ☃"


def _recorded_count_body(db_path: Path) -> bytes:
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        (event,) = [e for e in store.iter_events() if e.kind == EventKind.TOKEN_COUNT]
        return store.payload(event.payload_digests["request_body"])


def test_a_count_records_byte_for_byte_what_the_counting_endpoint_received(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    gw.count_tokens("compliance_review", PROMPT, caller="payments-svc")
    (sent,) = fake_api.requests
    assert sent.path == "/v1/messages/count_tokens"
    assert _recorded_count_body(db_path) == sent.body
    assert sent.json is not None and "max_tokens" not in sent.json  # not the planned body


def test_an_async_count_records_what_was_received_too(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    settings = Settings(
        policy_dir=policy_dir,
        database_url=f"sqlite:///{db_path}",
        anthropic_api_key=API_KEY,
        anthropic_base_url=fake_api.base_url,
        durability="os",
        default_caller="tests",
    )

    async def run() -> None:
        async with AsyncGateway(settings) as agw:
            await agw.count_tokens("compliance_review", PROMPT)

    asyncio.run(run())
    (sent,) = fake_api.requests
    assert _recorded_count_body(db_path) == sent.body


def test_a_count_whose_record_fails_sends_nothing(fake_api: FakeMessagesAPI) -> None:
    provider = AnthropicProvider(api_key=API_KEY, base_url=fake_api.base_url)
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": PROMPT}],
    }

    def on_wire(_wire: bytes) -> None:
        raise AuditWriteError("the audit record (token_count) could not be committed")

    try:
        with pytest.raises(AuditWriteError):
            provider.count_tokens(body, api_version="2023-06-01", on_wire=on_wire)
    finally:
        provider.close()
    assert fake_api.requests == []


def test_a_count_from_a_provider_that_never_announces_its_bytes_is_refused(
    policy_dir: Path, db_path: Path
) -> None:
    settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}")
    catalog = Catalog.load(None)
    store = AuditStore.open(f"sqlite:///{db_path}", durability="os")
    providers = Providers(settings, overrides={"local": lambda _settings: SkipsOnWire()})
    pipeline = RequestPipeline(
        policies=PolicySet.load(policy_dir, catalog),
        catalog=catalog,
        recorder=Recorder(store),
        providers=providers,
        durability="os",
    )
    try:
        with pytest.raises(ConfigurationError, match="without handing its bytes"):
            pipeline.count_tokens("offline_demo", prompt="The reviewer reads the")
        assert [e.kind for e in store.iter_events()] == []
    finally:
        providers.close()
        store.close()
