"""The public surface is exactly what __all__ says; a drift fails here first."""

from __future__ import annotations

import pytest

import audit
import gateway


def test_gateway_exports_are_pinned() -> None:
    assert sorted(gateway.__all__) == [
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
    for name in gateway.__all__:
        assert hasattr(gateway, name), name


@pytest.mark.slow  # a fresh interpreter imports audit
def test_audit_exports_resolve_and_audit_imports_nothing_from_gateway() -> None:
    for name in audit.__all__:
        assert hasattr(audit, name), name
    import subprocess
    import sys

    probe = "import audit, sys; print(any(m.startswith('gateway') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
