"""The server's error table names every class of gateway.errors, as the CLI's exit codes do,
and its answers keep to the API's error types."""

from __future__ import annotations

import inspect

from gateway import errors
from gateway.server._errors import ANSWERS, answer_for

API_TYPES = {
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "timeout_error",
    "overloaded_error",
}


def test_every_gateway_error_class_has_a_row() -> None:
    classes = {
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, errors.GatewayError)
    }
    assert classes == set(ANSWERS)
    assert {row.error_type for row in ANSWERS.values()} <= API_TYPES


def test_an_upstream_error_keeps_its_status_and_type_but_not_the_gateways_credentials() -> None:
    limited = answer_for(
        errors.UpstreamUnavailable("busy", status=429, error_type="rate_limit_error")
    )
    assert (limited.status, limited.error_type) == (429, "rate_limit_error")
    assert "x-should-retry" not in limited.headers
    refused = answer_for(
        errors.UpstreamRejected("no", status=401, error_type="authentication_error")
    )
    assert (refused.status, refused.error_type) == (500, "api_error")
    assert refused.headers["x-should-retry"] == "false"
    timeout = answer_for(errors.UpstreamUnavailable("slow", error_type="timeout"))
    assert (timeout.status, timeout.error_type) == (504, "timeout_error")
