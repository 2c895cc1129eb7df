"""Opening a store: which file a SQLite URL names, and the errors of an open that fails.

path = sqlite_path(url)             # None unless a SQLite file
error = missing_database(url)       # what a read-only open raises for a missing file
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from audit.errors import DatabaseUnavailable, LogFormatUnsupported
from audit.store.backend import Backend, db_reason
from audit.store.sequenced import begin_sequenced

INSUFFICIENT_PRIVILEGE = "42501"  # audit_begin_sequenced() from a role that may not begin it


def unavailable(exc: BaseException) -> DatabaseUnavailable:
    reason = db_reason(exc)
    return DatabaseUnavailable(
        f"cannot open the audit database ({reason}).",
        hint="Check GATEWAY_DATABASE_URL, that the server is up, and that the file is an "
        "audit database (not corrupt).",
    )


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names (None for any other URL, or one that does not parse)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def missing_database(url: str) -> DatabaseUnavailable | None:
    """The error for a SQLite URL whose file does not exist (None if it exists, or for any
    other backend): what a read-only open raises instead of creating an empty database."""
    path = sqlite_path(url)
    if path is None or path.exists():
        return None
    return DatabaseUnavailable(
        f"no audit database at {str(path)!r}.",
        hint="Check GATEWAY_DATABASE_URL: this command reads an existing audit database and "
        "creates none.",
    )


def begin_format_2(backend: Backend) -> int:
    """Begin format 2 (once: a log already in it returns its era), or say in one line that
    this database role may not: only the tables' owner or the application role can."""
    try:
        with backend.writer.begin() as conn:
            return begin_sequenced(conn)
    except SQLAlchemyError as exc:
        if getattr(getattr(exc, "orig", None), "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
            raise
        raise LogFormatUnsupported(
            "this database role may not begin audit log format 2 (only the tables' owner "
            "or the application role can).",
            hint="Begin it as the application role (a gateway, or `gateway audit integrate`, "
            "with GATEWAY_AUDIT_FORMAT=2), or unset GATEWAY_AUDIT_FORMAT for this role.",
        ) from exc
