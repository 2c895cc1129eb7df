"""The top-level click group: every command group, and the one error boundary around them."""

from __future__ import annotations

import sys
from typing import Any

import click

from gateway.cli._boundary import GatewayGroup
from gateway.cli._context import CliState
from gateway.cli.ask_cmd import ask_command
from gateway.cli.audit_cmd import audit_group
from gateway.cli.db_cmd import db_group
from gateway.cli.experiment_cmd import experiment_command
from gateway.cli.init_cmd import init_command
from gateway.cli.keys_cmd import keys_group
from gateway.cli.models_cmd import models_group
from gateway.cli.policy_cmd import policy_group
from gateway.cli.receipt_cmd import attach as attach_receipt_commands
from gateway.cli.replay_cmd import replay_command
from gateway.cli.retention_cmd import attach as attach_retention_commands
from gateway.cli.serve_cmd import serve_command

__all__ = ["main"]


@click.group(cls=GatewayGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.version_option(package_name="compliance-gateway")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Policy-enforced, audited Claude calls."""
    ctx.obj = CliState(debug=debug)


for command in (
    policy_group,
    models_group,
    db_group,
    audit_group,
    ask_command,
    replay_command,
    experiment_command,
    keys_group,
    serve_command,
    init_command,
):
    main.add_command(command)
attach_receipt_commands(audit_group)  # prove, tree-head, check-receipt, verify --from/--to
attach_retention_commands(audit_group)  # purge, erase, hold, release, holds


def run(argv: list[str] | None = None) -> Any:
    return main.main(args=argv if argv is not None else sys.argv[1:])
