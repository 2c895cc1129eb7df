"""Every error the server answers, in the Messages API's shape, from one table.

    {"type": "error", "error": {"type": "not_found_error", "message": "..."}, "request_id": "..."}

The official SDKs raise a typed exception from the status (400 ``BadRequestError``, 401
``AuthenticationError``, 404 ``NotFoundError``, 5xx ``InternalServerError``, ...), retry 408,
409, 429 and 5xx unless ``x-should-retry: false`` says not to, and wait as ``retry-after``
says. So a refusal the caller must fix (a policy violation, bad input, an unknown task) says
``x-should-retry: false``; an unavailable audit store is 503 (nothing was sent upstream, a
retry may succeed); an upstream failure keeps the upstream's status and type, except that an
upstream 401/403 concerns the gateway's own upstream key, not the caller's, and is a 500.
An upstream failure the gateway made attempts for says ``x-should-retry: false``: the gateway
has retried already, and the client's retries would multiply its attempts.

:data:`ANSWERS` names every class of :mod:`gateway.errors` (a test holds this), as the CLI's
exit-code table does; a subclass defined elsewhere takes its nearest listed ancestor's row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gateway import errors

__all__ = ["ANSWERS", "ApiError", "ErrorAnswer", "answer_for", "error_body"]


@dataclass(frozen=True)
class Row:
    status: int
    error_type: str
    retry: bool  # False: the answer carries x-should-retry: false


ANSWERS: Mapping[type[errors.GatewayError], Row] = MappingProxyType(
    {
        errors.GatewayError: Row(500, "api_error", retry=False),
        errors.ConfigurationError: Row(500, "api_error", retry=False),
        errors.PolicyError: Row(500, "api_error", retry=False),
        errors.PolicyLoadError: Row(500, "api_error", retry=False),
        # A version lacking its approvals: not this caller's to fix, and no retry helps.
        errors.PolicyNotApproved: Row(403, "permission_error", retry=False),
        errors.UnknownTask: Row(404, "not_found_error", retry=False),
        errors.PolicyViolation: Row(400, "invalid_request_error", retry=False),
        errors.ErasureRefused: Row(403, "permission_error", retry=False),
        errors.InputError: Row(400, "invalid_request_error", retry=False),
        errors.AuditError: Row(503, "api_error", retry=True),
        errors.AuditUnavailable: Row(503, "api_error", retry=True),
        errors.AuditWriteError: Row(503, "api_error", retry=True),
        errors.IntegrityAlert: Row(500, "api_error", retry=False),
        # Status and type come from the upstream (see answer_for); these are the fallbacks.
        errors.UpstreamError: Row(502, "api_error", retry=True),
        errors.UpstreamRejected: Row(502, "api_error", retry=False),
        errors.UpstreamUnavailable: Row(502, "api_error", retry=True),
        errors.OutputValidationError: Row(502, "api_error", retry=False),
    }
)

# An upstream failure without an HTTP status (no connection, a time-out, a broken answer).
_NO_STATUS = {"timeout": (504, "timeout_error")}
# The gateway's own upstream credentials were refused: nothing the caller can fix.
_GATEWAY_CREDENTIALS = (401, 403)


@dataclass(frozen=True)
class ErrorAnswer:
    status: int
    error_type: str
    message: str
    request_id: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class ApiError(Exception):
    """An error the server itself answers: a missing key, a body too large, bad JSON."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        *,
        retry: bool = False,
        request_id: str | None = None,
    ) -> None:
        self.status = status
        self.error_type = error_type
        self.message = message
        self.retry = retry
        self.request_id = request_id  # the audit record it ended, if there is one
        super().__init__(message)

    def answer(self) -> ErrorAnswer:
        headers = {} if self.retry else {"x-should-retry": "false"}
        return ErrorAnswer(
            self.status, self.error_type, self.message, self.request_id, headers=headers
        )


def _row(error: errors.GatewayError) -> Row:
    for cls in type(error).__mro__:
        row = ANSWERS.get(cls)
        if row is not None:
            return row
    raise AssertionError(f"{type(error).__name__} is not a GatewayError")  # pragma: no cover


def answer_for(error: errors.GatewayError) -> ErrorAnswer:
    """The status, type, message and headers that answer ``error``."""
    row = _row(error)
    status, error_type, retry = row.status, row.error_type, row.retry
    message = str(error)
    headers: dict[str, str] = {}
    if isinstance(error, errors.UpstreamError):
        if error.status in _GATEWAY_CREDENTIALS:
            status, error_type, retry = 500, "api_error", False
            message = f"the gateway's upstream credentials were refused: {message}"
        elif error.status is not None and 400 <= error.status <= 599:
            status, error_type = error.status, error.error_type or error_type
        elif error.error_type in _NO_STATUS:
            status, error_type = _NO_STATUS[error.error_type]
        headers.update(upstream_retry_after(error))
        if error.attempts >= 1:
            # The gateway already retried as far as its policy allows (GATEWAY_MAX_ATTEMPTS);
            # a client retrying on top would multiply the upstream attempts (4 x 3 in a 529
            # storm), so one client call makes at most the gateway's attempts.
            retry = False
    if isinstance(error, errors.PolicyViolation) and error.key == "system":
        message += " The system prompt is the policy's own (its prompt.system_file)."
    if not retry:
        headers["x-should-retry"] = "false"
    return ErrorAnswer(status, error_type, message, error.request_id, headers)


def upstream_retry_after(error: BaseException) -> dict[str, str]:
    """The upstream's ``retry-after`` / ``retry-after-ms`` headers, if its answer had them.

    The provider raises its error ``from`` the SDK's exception, whose ``response`` holds the
    upstream's headers; they are passed on as numbers only.
    """
    cause: BaseException | None = error
    for _ in range(4):
        cause = cause.__cause__ if cause is not None else None
        response = getattr(cause, "response", None)
        headers = getattr(response, "headers", None)
        if headers is None:
            continue
        found = {}
        for name in ("retry-after", "retry-after-ms"):
            value = headers.get(name)
            if isinstance(value, str) and _is_number(value):
                found[name] = value
        return found
    return {}


def _is_number(text: str) -> bool:
    try:
        return float(text) >= 0
    except ValueError:
        return False


MAX_MESSAGE_CHARS = 2000  # a message names what was wrong; it never echoes a body back


def error_body(answer: ErrorAnswer) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": answer.error_type, "message": _bounded(answer.message)},
        "request_id": answer.request_id,
    }


def _bounded(message: str) -> str:
    """``message`` as it may be answered: UTF-8 (a lone surrogate a caller sent, quoted in
    it, would fail the encoding and turn a 400 into a 500) and at most MAX_MESSAGE_CHARS
    (an unknown task named by a megabyte ``model`` is quoted, not echoed whole)."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return message.encode("utf-8", "backslashreplace").decode("utf-8")
