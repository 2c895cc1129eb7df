"""`gateway config`: the effective settings, and where each one came from.

    $ gateway --config /srv/gateway/gateway.toml config show
    $ gateway config show --format json

Secrets are shown as ``***`` (set) or ``-`` (unset); a database URL keeps everything but its
password. Each setting's source is ``default``, ``config PATH`` (with the secret's file, if
it was given as one) or ``env VAR``.
"""

from __future__ import annotations

import click
from pydantic import SecretStr

from gateway.cli._context import state_of
from gateway.cli._render import echo_json, shown, text_table
from gateway.settings import FIELDS, MASK, explain_settings

__all__ = ["config_group"]


@click.group("config")
def config_group() -> None:
    """The gateway's configuration."""


@config_group.command("show")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def show_command(ctx: click.Context, fmt: str) -> None:
    """Print every setting's effective value (secrets masked) and where it came from."""
    explained = explain_settings(config=state_of(ctx).config)
    dumped = explained.settings.model_dump(mode="json")  # the database URL without password
    rows = []
    for name in dumped:
        raw = getattr(explained.settings, name)
        value: object = (
            (MASK if raw is not None else None) if isinstance(raw, SecretStr) else dumped[name]
        )
        rows.append((name, value, FIELDS[name].env, explained.origins[name]))
    if fmt == "json":
        echo_json(
            {
                "config_file": str(explained.config) if explained.config else None,
                "settings": [{"name": n, "value": v, "env": e, "source": s} for n, v, e, s in rows],
            }
        )
        return
    click.echo(f"config file: {shown(explained.config) if explained.config else '(none)'}")
    click.echo(
        text_table(
            ["SETTING", "VALUE", "ENVIRONMENT VARIABLE", "SOURCE"],
            [[n, shown(_text(v)), e, shown(s)] for n, v, e, s in rows],
        )
    )


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "-"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)
