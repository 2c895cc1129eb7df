"""`gateway replay`: Verify, re-execute or migrate recorded requests."""

from __future__ import annotations

import click


@click.command("replay")
def replay_command() -> None:
    """Verify, re-execute or migrate recorded requests."""
    raise click.UsageError("not built yet")
