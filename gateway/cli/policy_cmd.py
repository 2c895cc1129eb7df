"""`gateway policy`: Review, show and compare policy files."""

from __future__ import annotations

import click


@click.group("policy")
def policy_group() -> None:
    """Review, show and compare policy files."""
