"""compliance-gateway: policy-enforced, audited Claude calls.

    from gateway import Gateway
    with Gateway.from_env() as gw:
        result = gw.complete("compliance_review", "Transaction: ...", caller="payments-svc")
        with gw.stream("compliance_review", "Transaction: ...", caller="payments-svc") as s:
            for event in s: ...                # Messages API stream events
        s.result                               # the same Result

The public API is exactly ``__all__``; everything else is internal. The clients, the Result
and the Settings load on first use, so that ``import gateway.cli`` (every CLI start) pays
only for what its command needs.
"""

import typing as _typing

from audit.lazy import lazy_names as _lazy_names
from gateway.errors import (
    AnswerAlertWarning,
    AuditError,
    AuditUnavailable,
    AuditWriteError,
    ConfigurationError,
    ErasureRefused,
    GatewayError,
    InputError,
    IntegrityAlert,
    OutputValidationError,
    PolicyError,
    PolicyLoadError,
    PolicyNotApproved,
    PolicyViolation,
    UnknownTask,
    UpstreamError,
    UpstreamRejected,
    UpstreamUnavailable,
)

if _typing.TYPE_CHECKING:
    from gateway.request import AsyncGateway, AsyncStream, Gateway, Stream
    from gateway.result import Result
    from gateway.settings import Durability, Settings

# Where each name that loads on first use lives.
_LAZY = {
    "AsyncGateway": "gateway.request",
    "AsyncStream": "gateway.request",
    "Gateway": "gateway.request",
    "Stream": "gateway.request",
    "Result": "gateway.result",
    "Durability": "gateway.settings",
    "Settings": "gateway.settings",
}

__all__ = [
    "AnswerAlertWarning",
    "AsyncGateway",
    "AsyncStream",
    "AuditError",
    "AuditUnavailable",
    "AuditWriteError",
    "ConfigurationError",
    "Durability",
    "ErasureRefused",
    "Gateway",
    "GatewayError",
    "InputError",
    "IntegrityAlert",
    "OutputValidationError",
    "PolicyError",
    "PolicyLoadError",
    "PolicyNotApproved",
    "PolicyViolation",
    "Result",
    "Settings",
    "Stream",
    "UnknownTask",
    "UpstreamError",
    "UpstreamRejected",
    "UpstreamUnavailable",
]


__getattr__ = _lazy_names(__name__, _LAZY)
