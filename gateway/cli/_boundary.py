"""The CLI's one error boundary: a user sees one clear line and an exit code, never a traceback.

Pass ``--debug`` before the command to see the traceback instead.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from audit.errors import AuditStoreError
from gateway.errors import GatewayError

INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE: a bug in the gateway, not in the user's input


class GatewayGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except click.UsageError as exc:
            # One line, like every other error, instead of click's usage block.
            where = exc.ctx.command_path if exc.ctx else ctx.command_path
            click.echo(f"error: {exc.format_message()} (see '{where} --help')", err=True)
            ctx.exit(exc.exit_code)
        except click.ClickException:
            raise
        except (GatewayError, AuditStoreError) as exc:
            if _debug(ctx):
                raise
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("error: interrupted.", err=True)
            ctx.exit(130)
        except Exception as exc:  # the boundary: anything left is a bug, shown in one line
            if _debug(ctx):
                raise
            click.echo(
                f"error: internal error ({type(exc).__name__}); "
                "run again with 'gateway --debug ...' and report the traceback.",
                err=True,
            )
            ctx.exit(INTERNAL_ERROR_EXIT)


def _debug(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(root.obj and root.obj.get("debug")) or "--debug" in sys.argv[1:2]
