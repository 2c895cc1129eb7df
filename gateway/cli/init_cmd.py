"""`gateway init DIR`: a deployment folder with policies, new keys and its settings.

$ gateway init /srv/gateway
$ cat /srv/gateway/NEXT-STEPS.md
"""

from __future__ import annotations

from pathlib import Path

import click

from gateway.cli._context import settings_of
from gateway.deployment import init_deployment


@click.command("init")
@click.argument("folder", type=click.Path(path_type=Path))
@click.pass_context
def init_command(ctx: click.Context, folder: Path) -> None:
    """Write a deployment into FOLDER (new or empty): a copy of the policies, a record and a
    checkpoint key (0600) with their public halves, gateway.toml and NEXT-STEPS.md."""
    made = init_deployment(folder, policies=Path(settings_of(ctx).policy_dir))
    click.echo(f"deployment written to {made.folder}")
    click.echo(f"  settings:   {made.config_file}")
    click.echo(f"  record key: {made.record_key.path} ({made.record_key.key_id})")
    click.echo(f"  checkpoint: {made.checkpoint_key.path} ({made.checkpoint_key.key_id})")
    click.echo(f"  next:       {made.next_steps}")
