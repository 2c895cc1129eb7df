"""`gateway experiment`: Compare sampling configurations by diversity and length."""

from __future__ import annotations

import click


@click.command("experiment")
def experiment_command() -> None:
    """Compare sampling configurations by diversity and length."""
    raise click.UsageError("not built yet")
