"""`gateway db`: create, upgrade and share the audit database's schema.

$ gateway db upgrade
$ gateway db current
$ gateway db grant reviewer --read-only      # PostgreSQL only; prints the statements run
"""

from __future__ import annotations

import click

from gateway.cli._context import settings_of
from gateway.evidence import grant_role, schema_status, upgrade_schema


@click.group("db")
def db_group() -> None:
    """Create and upgrade the audit database schema."""


@db_group.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Upgrade the audit database (GATEWAY_DATABASE_URL) to the current schema."""
    revision = upgrade_schema(settings_of(ctx))
    click.echo(f"audit database at schema revision {revision} (head).")


@db_group.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Show the audit database's schema revision."""
    status = schema_status(settings_of(ctx))
    state = "up to date" if status.up_to_date else "behind: run `gateway db upgrade`"
    click.echo(f"revision {status.current or 'none'} (this gateway needs {status.head}; {state})")


@db_group.command("grant")
@click.argument("role")
@click.option(
    "--read-only",
    is_flag=True,
    help="A reviewer: read the events (list, show, verify), append only export, checkpoint "
    "and access records; content only through the audited commands, each recorded first.",
)
@click.option(
    "--integrator",
    is_flag=True,
    help="`gateway audit integrate` (format 2): read everything, insert links, checkpoints "
    "and voids.",
)
@click.option(
    "--eraser",
    is_flag=True,
    help="`gateway audit purge|erase|hold`: read everything, record erasures and holds, and "
    "remove content named by its own erasure events (the only role that may).",
)
@click.pass_context
def db_grant(
    ctx: click.Context, role: str, read_only: bool, integrator: bool, eraser: bool
) -> None:
    """Give a PostgreSQL ROLE INSERT and SELECT on the audit tables, and nothing else."""
    if read_only + integrator + eraser > 1:
        raise click.UsageError("--read-only, --integrator and --eraser are different roles.")
    settings = settings_of(ctx)
    granted = grant_role(settings, role, read_only=read_only, integrator=integrator, eraser=eraser)
    for statement in granted:
        click.echo(statement + ";")
