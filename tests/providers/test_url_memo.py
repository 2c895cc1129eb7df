"""The SDK clients keep the URL they prepare for the base URL they have (the same parse on
every request otherwise), follow a new base URL, and an SDK release whose step has another
shape gets the plain client."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2

from gateway.providers.anthropic import AnthropicProvider, build_client
from gateway.providers.wire import _sdk
from tests.fakes.messages_api import FakeMessagesAPI

TIMEOUT = httpx2.Timeout(5.0)


def test_the_prepared_url_is_kept_for_the_current_base_url() -> None:
    client = build_client(api_key="k", base_url="http://one.invalid/v1api", timeout=TIMEOUT)
    first = client._prepare_url("/v1/messages")
    assert client._prepare_url("/v1/messages") is first
    assert str(first) == "http://one.invalid/v1api/v1/messages"
    assert str(client._prepare_url("/v1/messages/count_tokens")).endswith("/count_tokens")
    client.base_url = "http://two.invalid/"
    assert str(client._prepare_url("/v1/messages")) == "http://two.invalid/v1/messages"
    client.close()


class SDKWithReshapedStep(anthropic.Anthropic):
    """``_prepare_url`` now takes the request options (a release's reshaping)."""

    def _prepare_url(self, url: str, options: Any) -> httpx2.URL:  # type: ignore[override]
        return super()._prepare_url(url)


def test_a_reshaped_step_gets_the_plain_client() -> None:
    assert _sdk.url_memo_supported(anthropic.Anthropic)
    assert not _sdk.url_memo_supported(SDKWithReshapedStep)
    assert _sdk._with_url_memo(SDKWithReshapedStep) is SDKWithReshapedStep


def test_requests_still_reach_the_messages_endpoint(fake_api: FakeMessagesAPI) -> None:
    provider = AnthropicProvider(api_key="sk-ant-url-0000", base_url=fake_api.base_url)
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "x"}],
    }
    for _ in range(2):
        provider.send(body, api_version="2023-06-01", on_attempt_failed=lambda _f: None)
    provider.close()
    assert [r.path for r in fake_api.requests] == ["/v1/messages", "/v1/messages"]
