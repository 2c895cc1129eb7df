"""The CLI's one error boundary and its one table of exit codes.

A user sees one clear line and an exit code, never a traceback; ``gateway --debug ...`` shows
the traceback instead. Commands report an outcome in one of two ways only: they return
(exit 0), or they raise. A :class:`~gateway.errors.GatewayError` is printed and mapped through
:data:`EXIT_CODES`; :class:`CheckFailed` means "the report is printed, the check failed" and
exits with its code without another word:

    _print_report(report)
    if not report.ok:
        raise CheckFailed()                       # exit 1
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import Any

import click

from gateway import errors
from gateway.cli._context import state_of

__all__ = ["EXIT_CODES", "CheckFailed", "ExitCode", "GatewayGroup", "exit_code_for"]


class ExitCode(IntEnum):
    OK = 0
    CHECK_FAILED = 1  # a check found problems: review errors, verify defects, a sync that differs
    BAD_INPUT = 2  # bad input, usage or configuration: nothing was sent or recorded
    UPSTREAM = 3  # the model provider failed
    AUDIT = 4  # the audit database is unavailable or a write failed
    INTERNAL = 70  # EX_SOFTWARE: a bug in the gateway, not in the user's input
    INTERRUPTED = 130  # 128 + SIGINT
    BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head`


# Every class of gateway.errors is named, so a new error is a decision here, not a default
# (a test holds this). Subclasses defined elsewhere take their nearest listed ancestor's code.
EXIT_CODES: Mapping[type[errors.GatewayError], ExitCode] = MappingProxyType(
    {
        errors.GatewayError: ExitCode.CHECK_FAILED,
        errors.ConfigurationError: ExitCode.BAD_INPUT,
        errors.PolicyError: ExitCode.BAD_INPUT,
        errors.PolicyLoadError: ExitCode.BAD_INPUT,
        errors.PolicyNotApproved: ExitCode.BAD_INPUT,
        errors.UnknownTask: ExitCode.BAD_INPUT,
        errors.PolicyViolation: ExitCode.BAD_INPUT,
        errors.ErasureRefused: ExitCode.BAD_INPUT,
        errors.InputError: ExitCode.BAD_INPUT,
        errors.AuditError: ExitCode.AUDIT,
        errors.AuditUnavailable: ExitCode.AUDIT,
        errors.AuditWriteError: ExitCode.AUDIT,
        errors.IntegrityAlert: ExitCode.AUDIT,
        errors.UpstreamError: ExitCode.UPSTREAM,
        errors.UpstreamRejected: ExitCode.UPSTREAM,
        errors.UpstreamUnavailable: ExitCode.UPSTREAM,
        errors.OutputValidationError: ExitCode.CHECK_FAILED,
    }
)


def exit_code_for(error: errors.GatewayError) -> ExitCode:
    for cls in type(error).__mro__:
        code = EXIT_CODES.get(cls)
        if code is not None:
            return code
    raise AssertionError(f"{type(error).__name__} is not a GatewayError")  # pragma: no cover


class CheckFailed(Exception):
    """Raised by a command that has already shown why: exit with ``code``, print nothing."""

    def __init__(self, code: ExitCode = ExitCode.CHECK_FAILED) -> None:
        self.code = code
        super().__init__(code.name)


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
            ctx.exit(ExitCode.BAD_INPUT)
        except click.ClickException:
            raise
        except CheckFailed as exc:
            ctx.exit(exc.code)
        except errors.GatewayError as exc:
            if _debug(ctx):
                raise
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exit_code_for(exc))
        except BrokenPipeError:
            # The reader went away (`gateway audit list | head`): nothing is wrong to report.
            _discard_stdout()
            ctx.exit(ExitCode.BROKEN_PIPE)
        except KeyboardInterrupt:
            click.echo("error: interrupted.", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except Exception as exc:  # the boundary: anything left is a bug, shown in one line
            if _debug(ctx):
                raise
            click.echo(
                f"error: internal error ({type(exc).__name__}); "
                "run again with 'gateway --debug ...' and report the traceback.",
                err=True,
            )
            ctx.exit(ExitCode.INTERNAL)


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test runner's buffer): nothing will flush to a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _debug(ctx: click.Context) -> bool:
    return state_of(ctx).debug or "--debug" in sys.argv[1:2]
