"""The audit store as the gateway uses it: one adapter, and the one table that turns an audit
error into the gateway's.

    with closing(StoreAdapter.open(settings)) as log:
        rows = log.run(list_requests, filters, limit=20)    # list_requests(store, filters, ...)
        count = log.run(AuditStore.count_requests, task="pricing")
        for event in log.each(AuditStore.iter_events, kind=EventKind.APPROVAL): ...
    head = audit_call(checkpoints.loads, text)              # audit code over a file, no store

``audit`` knows nothing of the gateway, so it has its own error tree; callers of the gateway
see only ``GatewayError``. The facades (``gateway.evidence``, caller keys, replay) hold a
:class:`StoreAdapter` and reach the store through it, so an operation cannot forget to
translate: the table below is applied here and nowhere else, ``raise ... from exc`` (httpx's
``map_httpcore_exceptions``). The request path's appends and its read of a served answer say
more than the table can (which request stopped, that nothing was sent), so the recorder and
the replay cache keep their own fail-closed messages.

    AuditStoreError                  becomes
    ├── NotFound                     InputError        (a request id or seq that is not there)
    ├── CheckpointError              InputError        (an unreadable or foreign checkpoint)
    ├── LogFormatUnsupported         ConfigurationError
    ├── DatabaseUnavailable          AuditUnavailable
    ├── SchemaMismatch               AuditUnavailable
    ├── AppendFailed                 AuditWriteError   (InvalidEvent, ContentConflict)
    └── anything else                AuditError        (ContentMismatch: altered content)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Concatenate, ParamSpec, Self, TypeVar

from audit import AuditStore
from audit.errors import (
    AppendFailed,
    AuditStoreError,
    CheckpointError,
    DatabaseUnavailable,
    LogFormatUnsupported,
    NotFound,
    SchemaMismatch,
)
from audit.store import missing_database
from audit.store.signing import Signer
from gateway.errors import (
    AuditError,
    AuditUnavailable,
    AuditWriteError,
    ConfigurationError,
    GatewayError,
    InputError,
)
from gateway.settings import Settings

__all__ = ["OwnsLog", "StoreAdapter", "audit_call", "audit_failure", "require_database"]

P = ParamSpec("P")
T = TypeVar("T")

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


def audit_call(operation: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``operation(*args, **kwargs)``, an ``audit`` function that needs no store (a
    checkpoint or receipt file's parser, a migration); its errors leave as the gateway's."""
    try:
        return operation(*args, **kwargs)
    except AuditStoreError as exc:
        raise audit_failure(exc) from exc


def require_database(settings: Settings) -> None:
    """:class:`AuditUnavailable` ("no audit database at PATH") when ``settings`` names a
    SQLite file that is not there; checked before anything else is created."""
    missing = missing_database(settings.database_url)
    if missing is not None:
        raise audit_failure(missing) from missing


class StoreAdapter:
    """An open :class:`AuditStore` that speaks the gateway's errors.

    ``run(operation, ...)`` calls ``operation(store, ...)``: a store method
    (``AuditStore.head``) or any ``audit`` function that takes the store first
    (``verify_log``); ``each`` does the same for one that yields, translating while it is
    read. ``store`` is the store itself, for what cannot fail (its id, signer, format)."""

    def __init__(self, store: AuditStore) -> None:
        self.store = store

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        signer: Signer | None = None,
        create: bool = False,
        log_format: int = 1,
    ) -> StoreAdapter:
        """Open the audit database ``settings`` names. With ``create=False`` (the default:
        what every reader wants) a SQLite file that is not there is :class:`AuditUnavailable`
        ("no audit database at PATH"), and nothing is created."""
        store = audit_call(
            AuditStore.open,
            settings.database_url,
            settings.durability.value,
            signer=signer,
            create=create,
            log_format=log_format,
        )
        return cls(store)

    def run(
        self,
        operation: Callable[Concatenate[AuditStore, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        return audit_call(operation, self.store, *args, **kwargs)

    def each(
        self,
        operation: Callable[Concatenate[AuditStore, P], Iterable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Iterator[T]:
        try:
            yield from operation(self.store, *args, **kwargs)
        except AuditStoreError as exc:
            raise audit_failure(exc) from exc

    def close(self) -> None:
        self.store.close()


class OwnsLog:
    """A facade that owns its log's adapter: closing it, or leaving its ``with``, closes that."""

    _log: StoreAdapter

    def close(self) -> None:
        self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
