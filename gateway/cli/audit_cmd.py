"""`gateway db` and `gateway audit`: the audit database and the audit log."""

from __future__ import annotations

import click


@click.group("db")
def db_group() -> None:
    """Create and upgrade the audit database schema."""


@click.group("audit")
def audit_group() -> None:
    """List, show, verify, checkpoint and export the audit log."""
