"""`gateway models`: the model capability catalog.

$ gateway models list
$ gateway models list --format json
"""

from __future__ import annotations

import json

import click

from gateway.catalog import Catalog
from gateway.cli.policy_cmd import text_table
from gateway.settings import Settings


@click.group("models")
def models_group() -> None:
    """The model capability catalog."""


@models_group.command("list")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def list_command(fmt: str) -> None:
    """List every model the gateway knows and what it honours."""
    catalog = Catalog.load(Settings.from_env().catalog_override)
    if fmt == "json":
        click.echo(json.dumps([m.model_dump(mode="json") for m in catalog], indent=2))
        return
    headers = [
        "ID",
        "PINNED",
        "API",
        "SAMPLING",
        "TOP_K",
        "THINKING",
        "EFFORT",
        "JSON",
        "MAX OUT",
        "CONTEXT",
        "LIFECYCLE",
        "RETIRES",
    ]
    rows = [
        [
            m.id if m.alias_of is None else f"{m.id} -> {m.alias_of}",
            "yes" if m.pinned else "ALIAS",
            m.api_version,
            m.sampling,
            "yes" if m.top_k else "no",
            ",".join(m.thinking_types) or "-",
            ",".join(m.effort_levels) or "-",
            "yes" if m.structured_outputs else "no",
            m.max_output_tokens,
            m.context_window,
            m.lifecycle,
            m.retires_at.isoformat() if m.retires_at else "-",
        ]
        for m in catalog
    ]
    click.echo(text_table(headers, rows))
