"""The SDK's own OpenTelemetry spans are off: with a tracer provider installed and the SDK's
environment asking for content in its spans, an upstream call through the provider leaves no
span (the prompt goes to the audit database only; the gateway's own span carries none)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.providers.anthropic import AnthropicProvider
from tests.fakes.messages_api import FakeMessagesAPI

BODY = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "IBAN DE89 3704 0044 0532 0130 00: clear?"}],
}


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """A tracer provider that keeps every span, given to the SDK as its clients would find it
    through the environment's options (content mode on)."""
    monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE", "content")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    from opentelemetry import trace

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # the library's global, not ours
    yield exporter
    provider.shutdown()


def test_an_upstream_call_leaves_no_sdk_span(
    spans: InMemorySpanExporter, fake_api: FakeMessagesAPI
) -> None:
    provider = AnthropicProvider(api_key="sk-ant-trace-0000", base_url=fake_api.base_url)

    async def both() -> None:
        provider.send(BODY, api_version="2023-06-01", on_attempt_failed=lambda _f: None)
        await provider.asend(BODY, api_version="2023-06-01", on_attempt_failed=lambda _f: None)
        await provider.aclose()

    asyncio.run(both())
    assert len(fake_api.requests) == 2
    assert [s.name for s in spans.get_finished_spans()] == []
