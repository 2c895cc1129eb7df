"""compliance-gateway: policy-enforced, audited Claude calls.

    from gateway import Gateway
    with Gateway.from_env() as gw:
        result = gw.complete("compliance_review", "Transaction: ...", caller="payments-svc")
        with gw.stream("compliance_review", "Transaction: ...", caller="payments-svc") as s:
            for event in s: ...                # Messages API stream events
        s.result                               # the same Result

The public API is exactly ``__all__``; everything else is internal.
"""

from gateway.errors import (
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
from gateway.request import AsyncGateway, AsyncStream, Gateway, Stream
from gateway.result import Result
from gateway.settings import Durability, Settings

__all__ = [
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
