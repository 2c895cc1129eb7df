"""What one ``gateway`` invocation shares between its commands: the flags and the Settings.

    @click.command()
    @click.pass_context
    def command(ctx: click.Context) -> None:
        settings = settings_of(ctx)     # the config file and environment, once per invocation

The root group puts a :class:`CliState` in ``ctx.obj``; the Settings are built the first time
a command asks for them, so a command that needs none never fails on a bad variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from gateway.settings import Settings

__all__ = ["CliState", "settings_of", "state_of"]


@dataclass
class CliState:
    debug: bool = False
    config: Path | None = None  # --config; else $GATEWAY_CONFIG; else no file
    _settings: Settings | None = field(default=None, repr=False)

    def settings(self) -> Settings:
        if self._settings is None:
            # Loaded here: `gateway --help` and commands that need no settings skip pydantic.
            from gateway.settings import Settings

            self._settings = Settings.from_env(config=self.config)
        return self._settings


def state_of(ctx: click.Context | None = None) -> CliState:
    """The invocation's state; a command run without the root group gets a fresh one."""
    ctx = ctx or click.get_current_context()
    state = ctx.find_object(CliState)
    if state is None:
        state = ctx.find_root().ensure_object(CliState)
    return state


def settings_of(ctx: click.Context | None = None) -> Settings:
    """The Settings of this invocation, read from the environment on first use only."""
    return state_of(ctx).settings()
