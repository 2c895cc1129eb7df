"""`gateway models`: The model capability catalog."""

from __future__ import annotations

import click


@click.group("models")
def models_group() -> None:
    """The model capability catalog."""
