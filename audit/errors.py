"""The audit store's errors. ``audit`` knows nothing of the gateway, so it has its own tree.

AuditStoreError
├── DatabaseUnavailable     the URL cannot be opened, the file is not a database, ...
├── SchemaMismatch          the schema is behind (run `gateway db upgrade`) or newer than us
├── AppendFailed            an append could not be committed (nothing was written)
│   ├── InvalidEvent        the draft cannot be recorded as given (checked before the lock)
│   └── ContentConflict     another row is already stored under a payload's or policy's digest
├── NotFound                no such seq or request id
├── ContentMismatch         stored payload bytes no longer hash to the digest they are keyed by
├── UnreadableContent       stored content that no reader may parse (too deep, too large, ...)
├── CheckpointError         a checkpoint file is unreadable or signed with another key
└── LogFormatUnsupported    a log format this database cannot hold (format 2 on SQLite)
"""

from __future__ import annotations


class AuditStoreError(Exception):
    """Base of every error the audit store raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message} {self.hint}" if self.hint else self.message


class DatabaseUnavailable(AuditStoreError):
    pass


class SchemaMismatch(AuditStoreError):
    pass


class AppendFailed(AuditStoreError):
    pass


class NotFound(AuditStoreError):
    pass


class ContentMismatch(AuditStoreError):
    """Stored content no longer hashes to its digest: it was changed after it was written.

    Raised on read, so altered bytes are never returned (the gateway would serve them as a
    recorded answer). ``expected`` is the digest asked for, ``actual`` what the bytes hash to.
    """

    def __init__(self, expected: str, actual: str) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"the stored payload {expected} hashes to {actual}: it was altered after it was "
            "recorded, so it is not returned.",
            hint="Run `gateway audit verify` and restore the database from a trusted copy.",
        )


class CheckpointError(AuditStoreError):
    pass


class InvalidEvent(AppendFailed):
    """A draft that cannot be recorded as given (not JSON-canonical, policy content that does
    not match its fingerprint). Raised before the chain lock is taken; nothing is written."""


class ContentConflict(AppendFailed):
    """A payload or policy row is already stored under the digest of this event's content,
    holding other bytes: someone wrote it ahead of the event (content rows are insert-once,
    so the event would otherwise reference bytes that were never sent). The append is refused
    and nothing is written; ``digests`` names the rows. The gateway should raise an integrity
    alert: this never happens by accident."""

    def __init__(self, table: str, digests: list[str]) -> None:
        self.table = table
        self.digests = tuple(digests)
        super().__init__(
            f"the {table} row(s) {', '.join(digests)} already stored under this event's "
            "content digest hold other bytes: the content was written ahead of the event by "
            "someone else, so the event is not recorded.",
            hint="Nothing was written. Run `gateway audit verify` and find out who can write "
            "the audit database.",
        )


class ContentNotPermitted(AuditStoreError):
    """Content read by a role that may read it only against an ACCESS record, without one or
    against one that does not cover it (migration 0015; audit.store._content)."""


class UnreadableContent(AuditStoreError):
    """Stored content that cannot be parsed within the store's limits (see audit.store.bounded)."""


class LogFormatUnsupported(AuditStoreError):
    """A log format that does not exist, or that this backend cannot hold (format 2 needs
    PostgreSQL's SEQUENCE and an integrator; audit.store.sequenced)."""
