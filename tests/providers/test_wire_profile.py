"""The wire layer reads what a transport differs by from its profile, not from Anthropic's API:
request-id and rate-limit headers, error bodies, retry advice, the headers allowed out, the
base URL. A profile of another shape (here, one shaped like AWS's) goes through the same code.
"""

from __future__ import annotations

import dataclasses

import anthropic
import httpx2
import pytest

from gateway.providers.anthropic import FIRST_PARTY, ApiKeyAuth
from gateway.providers.wire import _sdk, classify

_AWS_TYPES = {
    "ThrottlingException": "rate_limit_error",
    "ValidationException": "invalid_request_error",
}


def _aws_error_fields(payload: object, headers: httpx2.Headers) -> tuple[str | None, str | None]:
    kind = headers.get("x-amzn-errortype", "").split(":")[0]
    message = payload.get("message") if isinstance(payload, dict) else None
    return _AWS_TYPES.get(kind), message if isinstance(message, str) else None


OTHER = dataclasses.replace(
    FIRST_PARTY,
    name="other",
    default_base_url=None,
    allowed_headers=frozenset({"authorization", "x-amz-date", "x-amz-security-token"}),
    request_id_header="x-amzn-requestid",
    rate_limit_prefix=None,
    should_retry_header=None,
    error_fields=_aws_error_fields,
)


def _status_error(status: int, headers: dict[str, str], body: object) -> anthropic.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1:9/model/m/invoke", content=b"{}")
    response = httpx2.Response(status, headers=headers, json=body, request=request)
    client = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9")
    try:
        return client._make_status_error("", body=body, response=response)
    finally:
        client.close()


def test_a_profile_reads_its_own_error_body_and_request_id() -> None:
    error = _status_error(
        400,
        {
            "x-amzn-errortype": "ValidationException:http://internal.amazon.com/",
            "x-amzn-requestid": "aws-req-1",
            "x-should-retry": "true",
        },
        {"message": "Malformed input request: sk-other-key"},
    )
    other = classify(error, profile=OTHER, secrets=("sk-other-key",))
    assert (other.error_type, other.upstream_request_id, other.retryable) == (
        "invalid_request_error",
        "aws-req-1",
        False,  # this profile's upstream gives no retry advice: the header is not read
    )
    assert other.upstream_message == "Malformed input request: [secret withheld]"
    first_party = classify(error, profile=FIRST_PARTY, secrets=())
    assert (first_party.error_type, first_party.upstream_request_id) == ("http_400", None)
    assert first_party.retryable  # Anthropic's x-should-retry is honoured on its own API


def test_a_throttled_request_is_retried_and_its_wait_honoured() -> None:
    error = _status_error(
        429,
        {"x-amzn-errortype": "ThrottlingException", "retry-after": "3"},
        {"message": "Too many requests"},
    )
    failure = classify(error, profile=OTHER, secrets=())
    assert (failure.error_type, failure.retryable, failure.retry_after_s) == (
        "rate_limit_error",
        True,
        3.0,
    )


def test_rate_limit_headers_are_the_profiles() -> None:
    headers = [("anthropic-ratelimit-requests-remaining", "9"), ("x-other", "1")]
    assert FIRST_PARTY.rate_limits(headers) == {"anthropic-ratelimit-requests-remaining": "9"}
    assert OTHER.rate_limits(headers) == {}


def test_only_the_profiles_headers_go_out() -> None:
    strip, _ = _sdk.header_strippers(OTHER)
    request = httpx2.Request(
        "POST",
        "http://127.0.0.1:9/",
        headers={
            "X-Amz-Date": "20261201T000000Z",
            "Authorization": "AWS4-HMAC-SHA256 ...",
            "anthropic-version": "2023-06-01",
            "cookie": "cdn=1",
            "x-stainless-lang": "python",
        },
    )
    strip(request)
    assert sorted(request.headers.keys()) == [
        "authorization",
        "content-length",
        "host",
        "x-amz-date",
        "x-stainless-lang",
    ]


def test_a_transport_without_a_default_url_must_be_given_one() -> None:
    timeout = httpx2.Timeout(5.0)
    with pytest.raises(ValueError, match="other transport needs a base URL"):
        _sdk.client_options(OTHER, ApiKeyAuth("k"), base_url=None, timeout=timeout)
    options = _sdk.client_options(OTHER, ApiKeyAuth("k"), base_url="http://h", timeout=timeout)
    assert options["base_url"] == "http://h" and options["max_retries"] == 0
