"""Claude on Google Vertex AI: its wire profile, its Google credentials, and the provider.

    provider = VertexProvider(project="bank-prod", region="europe-west1")  # ADC credentials
    reply = provider.send(body, api_version="vertex-2023-10-16", on_attempt_failed=record_attempt)

The SDK's ``AnthropicVertex`` client does what is Vertex's: it moves the model id into the
URL (``POST /projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict``,
``:streamRawPredict`` for a stream, which stays SSE; token counting at
``models/count-tokens:rawPredict``, the model named in the body) and sends a bearer token from
google-auth (Application Default Credentials, refreshed by google-auth; an explicit
``access_token`` where the caller holds one). The body's ``anthropic_version`` is the plan's
(``vertex-2023-10-16``; the SDK adds its own only to a body without one). The Messages call
around it is the shared :class:`~gateway.providers.wire.MessagesProvider`. Vertex's errors
may be Google's shape (``{"error": {"code", "message", "status"}}``) as well as the Messages
API's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import anthropic
import httpx2

from gateway.providers.wire import MessagesProvider, WireProfile

__all__ = ["VERTEX", "VertexAuth", "VertexProvider", "vertex_error_fields"]

# Google's canonical status names, as the Messages API's error types.
_STATUS_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "RESOURCE_EXHAUSTED": "rate_limit_error",
        "UNAVAILABLE": "overloaded_error",
        "DEADLINE_EXCEEDED": "timeout_error",
        "INTERNAL": "api_error",
        "INVALID_ARGUMENT": "invalid_request_error",
        "FAILED_PRECONDITION": "invalid_request_error",
        "PERMISSION_DENIED": "permission_error",
        "UNAUTHENTICATED": "authentication_error",
        "NOT_FOUND": "not_found_error",
    }
)


def vertex_error_fields(payload: object, _headers: httpx2.Headers) -> tuple[str | None, str | None]:
    """A Messages error body (``{"type": "error", "error": {"type", ...}}``) or Google's
    (``{"error": {"code", "message", "status"}}``, sometimes inside a one-item list)."""
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    if not isinstance(payload, Mapping):
        return None, None
    error = payload.get("error")
    if not isinstance(error, Mapping):
        return None, None
    text = error.get("message")
    kind = error.get("type")
    if not isinstance(kind, str):
        status = error.get("status")
        kind = _STATUS_TYPES.get(status) if isinstance(status, str) else None
    return kind, text if isinstance(text, str) else None


VERTEX = WireProfile(
    name="vertex",
    sync_client=anthropic.AnthropicVertex,  # type: ignore[arg-type]
    async_client=anthropic.AsyncAnthropicVertex,  # type: ignore[arg-type]
    default_base_url=None,  # one per region: https://{region}-aiplatform.googleapis.com/v1
    allowed_headers=frozenset({"authorization", "anthropic-beta"}),
    request_id_header="x-request-id",
    rate_limit_prefix=None,
    error_fields=vertex_error_fields,
    hints=MappingProxyType(
        {
            "authentication_error": "Check the Google credentials (gcloud auth "
            "application-default login, GOOGLE_APPLICATION_CREDENTIALS, the workload identity).",
            "permission_error": "Grant aiplatform.endpoints.predict on the project, and enable "
            "the Claude model in the Vertex AI Model Garden.",
            "not_found_error": "Check the Vertex model id, project and region in the catalog "
            "and settings.",
        }
    ),
    model_in_url=True,
    capture_credentials=MappingProxyType(
        {"region": "us-east5", "project_id": "capture", "access_token": "capture-only"}
    ),
)


@dataclass(frozen=True)
class VertexAuth:
    """The Google side of a Vertex client: project and region, and either an explicit access
    token (``access_token``) or google-auth credentials (``credentials``; None: the standard
    chain, Application Default Credentials, which google-auth refreshes)."""

    project: str
    region: str
    access_token: str | None = field(default=None, repr=False)
    credentials: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.project or not self.region:
            raise ValueError("project and region must not be empty")

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.access_token,) if self.access_token else ()

    def client_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"region": self.region, "project_id": self.project}
        if self.access_token is not None:
            options["access_token"] = self.access_token
        if self.credentials is not None:
            options["credentials"] = self.credentials
        return options

    def call_headers(self, api_version: str) -> dict[str, str]:
        return {}  # the SDK sends the token; the plan put anthropic_version into the body


def vertex_base_url(region: str) -> str:
    if region == "global":
        return "https://aiplatform.googleapis.com/v1"
    return f"https://{region}-aiplatform.googleapis.com/v1"


class VertexProvider(MessagesProvider):
    """The Messages call over Claude on Vertex AI (see the module)."""

    def __init__(
        self,
        *,
        project: str,
        region: str,
        access_token: str | None = None,
        credentials: Any = None,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        max_attempts: int = 4,
        retry_after_cap_s: float = 60.0,
        backoff_base_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(
            VERTEX,
            VertexAuth(project, region, access_token, credentials),
            base_url=base_url or vertex_base_url(region),
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            retry_after_cap_s=retry_after_cap_s,
            backoff_base_s=backoff_base_s,
            sleep=sleep,
            async_sleep=async_sleep,
        )
