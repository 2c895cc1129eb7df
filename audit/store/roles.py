"""PostgreSQL roles for the audit database: the application may INSERT and SELECT, never more.

    grant("postgresql+psycopg://admin@db/audit", "gateway_app")              # appenders
    grant("postgresql+psycopg://admin@db/audit", "auditor", read_only=True)  # reviewers

A reviewer (``read_only``) reads every table and may INSERT into ``events`` only, because its
exports, checkpoints and content reads record themselves; the row-level security policies of
migrations 0003, 0008 and 0012 let a role without INSERT on ``payloads`` append only
``export``, ``checkpoint``, ``access`` and ``evidence_pack`` events. Under format 2 it
reserves seqs for them only through ``audit_reserve()`` (migration 0011): a few at a time,
and none while many are reserved and not committed, so it cannot make the integrator void
seqs by the hundred thousand.
Neither a reviewer, the eraser nor the integrator may select ``payloads.content``
(migrations 0015, 0016): they select its ``digest`` and ``size``, and read content only
through ``audit_read_content()``, against an ACCESS event they committed that names it;
verify hashes content on the server (``audit_content_hashes()``). PUBLIC may execute
neither function (0016); each role granted here may.
The chain lock needs no grant of its own: ``audit_chain_lock()`` (migrations 0007, 0013)
takes it for a full appender (INSERT on ``payloads``) and for no other. A reviewer's
format-1 records go in only through ``CALL audit_review_append(...)`` (0013), which commits on
the server, so a reviewer cannot hold appends up; the application role can, while it keeps
a transaction open, and then only for their ``lock_timeout``.
Run as the owner of the tables (the role that ran `gateway db upgrade`). The owner and
superusers can still drop the triggers; checkpoints exist for that (docs/audit.md).
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, text
from sqlalchemy.exc import SQLAlchemyError

from audit.errors import DatabaseUnavailable
from audit.store._revisions import check_at_head
from audit.store.backend import Backend, db_reason

APPEND_TABLES = ("events", "payloads", "policies")
# What a reviewer's own records need: EXPORT, CHECKPOINT and ACCESS events carry no payload
# or policy.
# Holding INSERT on payloads is what marks a full appender to the events policies (0003).
REVIEW_TABLES = ("events",)
# Format 2 (0010): links and checkpoints are the integrator's alone; it voids dead writers'
# seqs (events of kind void only, 0010's row policy) and extends the tree.
# merkle_nodes (0009) is derived: only the integrator (and the owner, who rebuilds it) may
# add to it. A role that could INSERT there could plant a node ahead of its leaves; the
# stored tree would then take that position as stored and answer from it. The app and
# reviewer roles still prove: audit.proofs.tree streams the hash column when it cannot write.
INTEGRATE_TABLES = ("events", "chain", "chain_checkpoints", "merkle_nodes")
# The eraser (migration 0014): removes content under its own erasure events and records holds;
# DELETE on payloads is what row security and the payloads trigger recognise it by. It never
# INSERTs content, so it cannot forge a request or an answer.
ERASE_TABLES = ("events", "erased_content")
READ_TABLES = (
    *APPEND_TABLES,
    "erased_content",
    "merkle_nodes",
    "chain",
    "chain_checkpoints",
    "reservation_marks",
    "audit_meta",
    "alembic_version",
)
# Content checked or read on the server (0015): verify hashes content through the one, a
# reviewer reads it against its ACCESS record through the other.
CONTENT_FUNCTIONS = "audit_read_content(integer, text), audit_content_hashes(text[])"
_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _check_owner(conn: Connection, role: str) -> None:
    """Refuse unless this session may grant on every audit table: PostgreSQL answers a GRANT
    by a role that neither owns the table nor holds a grant option with a WARNING only ("no
    privileges were granted"), so the command would print its statements and exit 0."""
    tables = [*READ_TABLES, "events_seq"]
    rows = conn.execute(
        text(
            "SELECT c.relname, pg_get_userbyid(c.relowner) AS owner FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = ANY(:tables) "
            "AND NOT pg_has_role(current_user, c.relowner, 'USAGE') "
            "AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) "
            "ORDER BY c.relname"
        ),
        {"tables": tables},
    ).all()
    if rows:
        user = conn.execute(text("SELECT current_user")).scalar_one()
        owners = sorted({row.owner for row in rows})
        raise DatabaseUnavailable(
            f"{user!r} does not own the audit tables ({', '.join(r.relname for r in rows[:3])}"
            f"{', ...' if len(rows) > 3 else ''} belong to {', '.join(owners)}), so PostgreSQL "
            f"would grant {role!r} nothing; nothing was granted.",
            hint=f"Run `gateway db grant` as {owners[0]} (the role that ran `gateway db "
            "upgrade`): its GATEWAY_DATABASE_URL.",
        )


def grant(
    url: str, role: str, *, read_only: bool = False, integrator: bool = False, eraser: bool = False
) -> list[str]:
    """Grant ``role`` exactly what the gateway needs (``integrator``: what `gateway audit
    integrate` needs; ``eraser``: what `gateway audit purge|erase|hold` need); returns the
    statements run."""
    if not _ROLE.match(role):
        raise DatabaseUnavailable(
            f"{role!r} is not a plain PostgreSQL role name.",
            hint="Use lower-case letters, digits and underscores.",
        )
    backend = Backend.connect(url, "fsync")
    if backend.dialect != "postgresql":
        backend.dispose()
        raise DatabaseUnavailable(
            "roles exist only on PostgreSQL; a SQLite file is protected by file permissions "
            "and triggers.",
            hint="Point GATEWAY_DATABASE_URL at the PostgreSQL audit database.",
        )
    tables = ", ".join(READ_TABLES)
    statements = [
        f"REVOKE ALL ON {tables} FROM {role}",
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT SELECT ON {tables} TO {role}",
    ]
    inserts = (
        INTEGRATE_TABLES
        if integrator
        else ERASE_TABLES
        if eraser
        else REVIEW_TABLES
        if read_only
        else APPEND_TABLES
    )
    statements.append(f"GRANT INSERT ON {', '.join(inserts)} TO {role}")
    if eraser:
        statements.append(f"GRANT DELETE ON payloads TO {role}")
    if read_only or eraser or integrator:
        # None writes content, so none selects it (migrations 0015, 0016): which content
        # exists, yes; what it says only through audit_read_content(), against an ACCESS
        # record the role committed first.
        statements.append(f"REVOKE SELECT ON payloads FROM {role}")
        statements.append(f"GRANT SELECT (digest, size) ON payloads TO {role}")
    # PUBLIC may not execute them (0016): each granted role may.
    statements.append(f"GRANT EXECUTE ON FUNCTION {CONTENT_FUNCTIONS} TO {role}")
    statements.append(f"REVOKE ALL ON SEQUENCE events_seq FROM {role}")
    if not integrator and not read_only and not eraser:
        # Format-2 appenders reserve their seqs through audit_reserve() (0011), which needs
        # no grant; USAGE lets the application role call nextval too. A reviewer gets no
        # USAGE: audit_reserve() bounds what it may reserve for its own records.
        statements.append(f"GRANT USAGE ON SEQUENCE events_seq TO {role}")
    try:
        with backend.writer.begin() as conn:
            check_at_head(conn)
            exists = conn.execute(
                text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}
            ).first()
            if exists is None:
                raise DatabaseUnavailable(
                    f"there is no PostgreSQL role {role!r}.",
                    hint=f"Create it first: CREATE ROLE {role} LOGIN PASSWORD '...';",
                )
            _check_owner(conn, role)
            for statement in statements:
                conn.execute(text(statement))
    except SQLAlchemyError as exc:
        reason = db_reason(exc)
        raise DatabaseUnavailable(
            f"could not grant privileges to {role!r} ({reason}).",
            hint="Run as the owner of the audit tables (the role that ran `gateway db upgrade`).",
        ) from exc
    finally:
        backend.dispose()
    return statements
