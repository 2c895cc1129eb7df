"""The wire layer under the provider protocol: one Messages call for every Claude transport.

    provider = MessagesProvider(FIRST_PARTY, ApiKeyAuth(key), base_url=None)

A transport (Anthropic's own API, AWS Bedrock, Google Vertex AI) is a :class:`WireProfile`
(how its SDK client is built, which headers go on the wire, how its request ids, rate limits,
streams and error bodies read) plus its :class:`WireAuth` credentials; the call's state
machine (:class:`MessagesCall`), its sync and async loops (:class:`MessagesProvider`), the
record of the exact bytes sent (:class:`WireCapture` and the on-wire hook) and the retry rules
(:class:`RetryPolicy`) are shared by all.
"""

from gateway.providers.base import BETAS_FIELD
from gateway.providers.wire._call import MessagesCall
from gateway.providers.wire._capture import WireCapture
from gateway.providers.wire._failures import UPSTREAM_FAILURES, Failure, classify, describe
from gateway.providers.wire._profile import ErrorFields, WireAuth, WireProfile
from gateway.providers.wire._provider import MessagesProvider
from gateway.providers.wire._retry import RetryPolicy
from gateway.providers.wire._sdk import build_async_client, build_client

__all__ = [
    "BETAS_FIELD",
    "UPSTREAM_FAILURES",
    "ErrorFields",
    "Failure",
    "MessagesCall",
    "MessagesProvider",
    "RetryPolicy",
    "WireAuth",
    "WireCapture",
    "WireProfile",
    "build_async_client",
    "build_client",
    "classify",
    "describe",
]
