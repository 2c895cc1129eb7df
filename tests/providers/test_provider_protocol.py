"""AnthropicProvider is a Provider: the gateway's seam, checked at run time and by mypy."""

from __future__ import annotations

import inspect

from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.base import Provider
from tests.fakes.messages_api import FakeMessagesAPI


def test_anthropic_provider_satisfies_the_provider_protocol(fake_api: FakeMessagesAPI) -> None:
    p: Provider = AnthropicProvider(api_key="sk-ant-protocol", base_url=fake_api.base_url)
    try:
        assert isinstance(p, Provider)
        assert p.name == "anthropic"
        assert p.model_version("claude-sonnet-4-6") is None  # a Claude id names a fixed model
    finally:
        p.close()


def test_send_and_asend_keep_the_protocol_signatures() -> None:
    for name in ("wire_bytes", "model_version", "send", "asend", "close", "aclose"):
        ours = inspect.signature(getattr(AnthropicProvider, name))
        theirs = inspect.signature(getattr(Provider, name))
        assert list(ours.parameters) == list(theirs.parameters), name
        assert [p.kind for p in ours.parameters.values()] == [
            p.kind for p in theirs.parameters.values()
        ], name
    assert inspect.iscoroutinefunction(AnthropicProvider.asend)
    assert inspect.iscoroutinefunction(AnthropicProvider.aclose)
