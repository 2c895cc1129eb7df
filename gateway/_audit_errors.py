"""The one table that turns an audit store's error into the gateway's, for every caller.

    with translated():
        store.iter_events()            # an AuditStoreError leaves as e.g. AuditUnavailable

``audit`` knows nothing of the gateway, so it has its own error tree; callers of the gateway
see only ``GatewayError``. The recorder (the request path), ``ReplaySession`` and
``Auditing`` translate through here; the recorder's appends add their own fail-closed message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from audit.errors import (
    AppendFailed,
    AuditStoreError,
    CheckpointError,
    DatabaseUnavailable,
    LogFormatUnsupported,
    NotFound,
    SchemaMismatch,
)
from gateway.errors import (
    AuditError,
    AuditUnavailable,
    AuditWriteError,
    ConfigurationError,
    GatewayError,
    InputError,
)

# Most specific first: InvalidEvent is an AppendFailed, and the order decides.
_TRANSLATION: tuple[tuple[type[AuditStoreError], type[GatewayError]], ...] = (
    (NotFound, InputError),
    (CheckpointError, InputError),
    (LogFormatUnsupported, ConfigurationError),
    (DatabaseUnavailable, AuditUnavailable),
    (SchemaMismatch, AuditUnavailable),
    (AppendFailed, AuditWriteError),
    (AuditStoreError, AuditError),
)


def audit_failure(exc: AuditStoreError) -> GatewayError:
    """The gateway's error for an audit store's, with the same message and advice."""
    gateway_error = next(ours for theirs, ours in _TRANSLATION if isinstance(exc, theirs))
    return gateway_error(exc.message, hint=exc.hint)


@contextmanager
def translated() -> Iterator[None]:
    """Run a block against the audit store; its errors leave as the gateway's."""
    try:
        yield
    except AuditStoreError as exc:
        raise audit_failure(exc) from exc
