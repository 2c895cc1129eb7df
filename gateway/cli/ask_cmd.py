"""`gateway ask`: Send one request through the gateway."""

from __future__ import annotations

import click


@click.command("ask")
def ask_command() -> None:
    """Send one request through the gateway."""
    raise click.UsageError("not built yet")
