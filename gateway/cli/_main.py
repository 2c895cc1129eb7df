"""The top-level click group: every command group, and the one error boundary around them."""

from __future__ import annotations

import atexit
import gc
import importlib
import sys
from pathlib import Path
from typing import Any

import click

from gateway.cli._boundary import GatewayGroup
from gateway.cli._context import CliState

__all__ = ["COMMANDS", "main"]

# At exit nearly every object left is a module's (SQLAlchemy's, pydantic's, click's) and none
# is garbage: freezing them spares the interpreter's last collection a walk of all of them, a
# fifth of a read command's CPU (`gateway audit list`, bench/results/cli_start.md). Files and
# connections are closed by the commands themselves (``with``), never left to that collection.
atexit.register(gc.freeze)

# Every command: its module, its object and the line `gateway --help` shows for it. A
# command's module loads only when that command runs (or its own help is asked for), so
# `gateway --help` and `gateway audit list` import nothing the other commands need (the SDK,
# numpy, jsonschema). tests/test_cli_fast_start.py holds each line to the command's own help.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "ask": (
        "gateway.cli.ask_cmd",
        "ask_command",
        "Send one request for TASK; PROMPT '-' or absent reads stdin.",
    ),
    "audit": (
        "gateway.cli.audit_lazy_cmd",
        "audit_group",
        "List, show, verify, checkpoint and export the audit log.",
    ),
    "config": ("gateway.cli.config_cmd", "config_group", "The gateway's configuration."),
    "db": ("gateway.cli.db_cmd", "db_group", "Create and upgrade the audit database schema."),
    "evidence": (
        "gateway.cli.evidence_cmd",
        "evidence_command",
        "Build REGIME's evidence pack for a period: an HTML...",
    ),
    "experiment": (
        "gateway.cli.experiment_cmd",
        "experiment_command",
        "Draw N audited samples of TASK per prompt and...",
    ),
    "init": (
        "gateway.cli.init_cmd",
        "init_command",
        "Write a deployment into FOLDER (new or empty): a copy of...",
    ),
    "keys": ("gateway.cli.keys_cmd", "keys_group", "Caller keys for `gateway serve`."),
    "models": ("gateway.cli.models_cmd", "models_group", "The model capability catalog."),
    "policy": (
        "gateway.cli.policy_cmd",
        "policy_group",
        "Review, show, compare and approve policy files.",
    ),
    "replay": (
        "gateway.cli.replay_cmd",
        "replay_command",
        "Verify, re-execute or migrate recorded requests...",
    ),
    "serve": (
        "gateway.cli.serve_cmd",
        "serve_command",
        "Serve the Messages API on HOST:PORT; callers authenticate...",
    ),
}


class LazyGroup(GatewayGroup):
    """The root group: each command's module imported on first use (click's LazyGroup)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self.commands:
            module_name, attribute, _help = COMMANDS[cmd_name]
            command: click.Command = getattr(importlib.import_module(module_name), attribute)
            self.add_command(command, cmd_name)
        return self.commands[cmd_name]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The TOML config file (default: $GATEWAY_CONFIG); environment variables override it.",
)
@click.version_option(package_name="compliance-gateway")
@click.pass_context
def main(ctx: click.Context, debug: bool, config: Path | None) -> None:
    """Policy-enforced, audited Claude calls."""
    ctx.obj = CliState(debug=debug, config=config)


def run(argv: list[str] | None = None) -> Any:
    return main.main(args=argv if argv is not None else sys.argv[1:])
