"""Claude through Anthropic's own API: the first-party wire profile, its credentials, and the
provider the registry builds from them.

    provider = AnthropicProvider(api_key=key.get_secret_value(), base_url=base_url)
    reply = provider.send(body, api_version="2023-06-01", on_attempt_failed=record_attempt)
    reply.response["content"], reply.request_bytes, reply.upstream_request_id, reply.attempts

Everything a Messages call does (attempts, retries, the stream loop, the record of the exact
bytes) is the provider-neutral :class:`~gateway.providers.wire.MessagesProvider`; this module
says only what is Anthropic's: the SDK client classes, an API key sent as a bearer token with
the ``anthropic-version`` the plan chose, the headers allowed onto the wire, ``request-id``
and ``anthropic-ratelimit-*``, the ``x-should-retry`` advice, the error body's shape and what
to tell a person. Another transport of Claude (AWS Bedrock, Google Vertex AI) is a module like
this one, with its own profile and credentials.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import anthropic
import httpx2

from gateway.providers.base import AttemptFailure, ProviderReply
from gateway.providers.wire import MessagesProvider, WireProfile
from gateway.providers.wire import build_client as build_sdk_client

__all__ = [
    "FIRST_PARTY",
    "AnthropicProvider",
    "ApiKeyAuth",
    "AttemptFailure",
    "ProviderReply",
    "build_client",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"

FIRST_PARTY = WireProfile(
    name="anthropic",
    sync_client=anthropic.Anthropic,
    async_client=anthropic.AsyncAnthropic,
    default_base_url=DEFAULT_BASE_URL,
    # anthropic-beta: only the planned body's values (a caller's, under [caller] betas); the
    # call sets or omits it on every request, so none comes from the environment.
    allowed_headers=frozenset({"authorization", "anthropic-version", "anthropic-beta"}),
    request_id_header="request-id",
    rate_limit_prefix="anthropic-ratelimit-",
    should_retry_header="x-should-retry",
    messages_path="/v1/messages",
    hints=MappingProxyType(
        {
            "authentication_error": "Check that ANTHROPIC_API_KEY holds a valid key.",
            "permission_error": "The key is not allowed to use this model or feature.",
            "billing_error": "The account's billing needs attention in the Claude Console.",
        }
    ),
)


@dataclass(frozen=True)
class ApiKeyAuth:
    """An Anthropic API key: given to the SDK explicitly (so it reads no ANTHROPIC_API_KEY,
    AUTH_TOKEN, profile or config file) and sent on each request as a bearer token."""

    api_key: str

    def __post_init__(self) -> None:
        if not self.api_key:
            raise ValueError("api_key must not be empty")

    def __repr__(self) -> str:
        return "ApiKeyAuth(api_key=<hidden>)"

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.api_key,)

    @property
    def region(self) -> None:
        return None  # Anthropic's API is one endpoint; where inference runs is inference_geo

    def client_options(self) -> dict[str, Any]:
        return {"api_key": self.api_key}

    def call_headers(self, api_version: str) -> dict[str, str]:
        return {"anthropic-version": api_version, "Authorization": f"Bearer {self.api_key}"}


class AnthropicProvider(MessagesProvider):
    """The Messages call over Anthropic's own API (see the module)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        max_attempts: int = 4,
        retry_after_cap_s: float = 60.0,
        backoff_base_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(
            FIRST_PARTY,
            ApiKeyAuth(api_key),
            base_url=base_url,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            retry_after_cap_s=retry_after_cap_s,
            backoff_base_s=backoff_base_s,
            sleep=sleep,
            async_sleep=async_sleep,
        )


def build_client(
    *, api_key: str, base_url: str | None, timeout: httpx2.Timeout
) -> anthropic.Anthropic:
    """A first-party SDK client built as the provider's is (``gateway models sync`` lists
    models with it)."""
    return build_sdk_client(FIRST_PARTY, ApiKeyAuth(api_key), base_url=base_url, timeout=timeout)
