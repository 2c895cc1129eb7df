"""The audit log as the gateway's callers see it: read, verify, export and checkpoint.

    with Auditing.open(settings) as auditing:
        for request in auditing.requests(EventFilter(task="compliance_review"), limit=20):
            print(request.request_id, request.status)
        report = auditing.verify(checkpoint=Path("head.json"))

The schema functions (:func:`upgrade_schema`, :func:`schema_status`, :func:`grant_role`) need
no open store. Every error the audit store raises is translated here, once, into the
gateway's tree (:func:`audit_failure`), so a caller catches ``GatewayError`` and nothing else:

    AuditStoreError                  becomes
    ├── NotFound                     InputError        (a request id or seq that is not there)
    ├── CheckpointError              InputError        (an unreadable or foreign checkpoint)
    ├── DatabaseUnavailable          AuditUnavailable
    ├── SchemaMismatch               AuditUnavailable
    ├── AppendFailed                 AuditWriteError
    └── anything else                AuditError        (ContentMismatch: altered content)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self, TextIO

from pydantic import BaseModel, ConfigDict

from audit import (
    AuditStore,
    Checkpoint,
    CheckpointError,
    EventFilter,
    EventKind,
    ExportSummary,
    RequestSummary,
    StoredEvent,
    VerifyReport,
    export_events,
    list_requests,
    migrate,
    roles,
)
from audit import checkpoint as checkpoints
from audit.export import ExportFormat
from gateway._audit_errors import audit_failure, translated
from gateway.errors import (
    ConfigurationError,
    InputError,
)
from gateway.settings import Settings

__all__ = [
    "Auditing",
    "Checkpoint",
    "EventFilter",
    "EventKind",
    "ExportFormat",
    "ExportSummary",
    "RequestSummary",
    "SchemaStatus",
    "StoredEvent",
    "VerifyReport",
    "audit_failure",
    "checkpoint_text",
    "grant_role",
    "schema_status",
    "translated",
    "upgrade_schema",
]

Progress = Callable[[int, int], None]


def checkpoint_text(head: Checkpoint) -> str:
    """The checkpoint file's text: what ``gateway audit checkpoint`` writes."""
    return checkpoints.dumps(head)


class SchemaStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    current: str | None  # None: the database has no schema yet
    head: str  # the revision this gateway needs

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


def upgrade_schema(settings: Settings) -> str | None:
    """Migrate the audit database to the schema this gateway needs; returns its revision."""
    with translated():
        return migrate.upgrade(settings.database_url)


def schema_status(settings: Settings) -> SchemaStatus:
    with translated():
        return SchemaStatus(
            current=migrate.current(settings.database_url), head=migrate.head_revision()
        )


def grant_role(settings: Settings, role: str, *, read_only: bool = False) -> list[str]:
    """Give a PostgreSQL role what the gateway (or, read-only, a reviewer) needs; returns the
    statements run."""
    with translated():
        return roles.grant(settings.database_url, role, read_only=read_only)


class Auditing:
    """An open audit log. Reads are plain; an export and a checkpoint are recorded as events."""

    def __init__(self, store: AuditStore, settings: Settings) -> None:
        self._store = store
        self._settings = settings

    @classmethod
    def open(cls, settings: Settings) -> Auditing:
        with translated():
            store = AuditStore.open(settings.database_url, settings.durability.value)
        return cls(store, settings)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def requests(
        self, filters: EventFilter | None = None, *, limit: int | None = 50
    ) -> list[RequestSummary]:
        """The newest ``limit`` requests matching ``filters`` (all when None), oldest first."""
        with translated():
            return list_requests(self._store, filters, limit=limit)

    def request_events(self, request_id: str) -> list[StoredEvent]:
        """A request's whole life in seq order; an ``InputError`` when nothing is recorded."""
        with translated():
            events = self._store.events_for_request(request_id)
        if not events:
            raise InputError(
                f"no audit events for request {request_id!r}.",
                hint="List request ids with `gateway audit list`.",
            )
        return events

    def verify(
        self,
        *,
        checkpoint: Path | None = None,
        public_key: str | None = None,
        progress: Progress | None = None,
    ) -> VerifyReport:
        """Recompute every hash and link; with ``checkpoint``, also prove the log still holds
        and extends it. The checkpoint must be signed by ``public_key`` (hex Ed25519), else
        by the key of ``GATEWAY_CHECKPOINT_KEY`` when one is set."""
        head = self._load_checkpoint(checkpoint, public_key) if checkpoint is not None else None
        with translated():
            return self._store.verify(progress, checkpoint=head)

    def export(
        self,
        out: TextIO,
        fmt: ExportFormat = "jsonl",
        filters: EventFilter | None = None,
        *,
        reviewer: str | None = None,
    ) -> ExportSummary:
        """Write the matching events (bodies exactly as hashed) to ``out``; the export is
        recorded first as an EXPORT event naming ``reviewer``."""
        with translated():
            return export_events(self._store, out, fmt, filters, reviewer=reviewer)

    def checkpoint(self, *, unsigned: bool = False) -> Checkpoint:
        """Record a CHECKPOINT event and return the head it made, signed with
        ``GATEWAY_CHECKPOINT_KEY``; unsigned only when no key is set and ``unsigned`` is asked
        for. Keep it with :func:`checkpoint_text`; ``verify(checkpoint=...)`` reads it back."""
        key = self._signing_key()
        if key is None and not unsigned:
            raise ConfigurationError(
                "no checkpoint signing key is configured.", hint=checkpoints.KEY_HINT
            )
        with translated():
            return self._store.checkpoint(key)

    def _signing_key(self) -> bytes | None:
        secret = self._settings.checkpoint_key
        if secret is None:
            return None
        try:
            return checkpoints.parse_key(secret.get_secret_value())
        except CheckpointError as exc:
            raise ConfigurationError(exc.message, hint=exc.hint) from exc

    def _load_checkpoint(self, path: Path, public_key: str | None) -> Checkpoint:
        if public_key is not None:
            trusted: str | None = public_key.strip().lower()
        else:
            key = self._signing_key()
            trusted = checkpoints.public_key(key) if key is not None else None
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise InputError(
                f"cannot read the checkpoint file {str(path)!r}: {reason}.",
                hint="Pass the file written by `gateway audit checkpoint`.",
            ) from exc
        with translated():
            return checkpoints.loads(text, trusted_public_key=trusted)
