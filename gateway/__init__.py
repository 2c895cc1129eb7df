"""compliance-gateway: policy-enforced, audited Claude calls.

    from gateway import Gateway
    with Gateway.from_env() as gw:
        result = gw.complete("compliance_review", "Transaction: ...", caller="payments-svc")

The public API is exactly ``__all__``; everything else is internal.
"""

from gateway.client import AsyncGateway, Gateway
from gateway.errors import (
    AuditError,
    AuditUnavailable,
    AuditWriteError,
    ConfigurationError,
    GatewayError,
    InputError,
    IntegrityAlert,
    OutputValidationError,
    PolicyError,
    PolicyLoadError,
    PolicyViolation,
    UnknownTask,
    UpstreamError,
    UpstreamRejected,
    UpstreamUnavailable,
)
from gateway.result import Result
from gateway.settings import Durability, Settings

__all__ = [
    "AsyncGateway",
    "AuditError",
    "AuditUnavailable",
    "AuditWriteError",
    "ConfigurationError",
    "Durability",
    "Gateway",
    "GatewayError",
    "InputError",
    "IntegrityAlert",
    "OutputValidationError",
    "PolicyError",
    "PolicyLoadError",
    "PolicyViolation",
    "Result",
    "Settings",
    "UnknownTask",
    "UpstreamError",
    "UpstreamRejected",
    "UpstreamUnavailable",
]
