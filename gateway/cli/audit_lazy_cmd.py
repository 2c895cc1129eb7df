"""`gateway audit`: the group, whose commands load on first use.

`gateway audit list` and `gateway audit show` are the commands an operator runs most; each
imports only its own module (gateway.cli.audit_list_cmd, gateway.cli.audit_show_cmd), not the
policy history, receipts, retention and integrator commands beside them. Any other command,
or the group's help, loads them all (gateway.cli.audit_cmd, with the receipt and retention
commands attached).
"""

from __future__ import annotations

import click

__all__ = ["audit_group"]


class LazyAuditGroup(click.Group):
    """The audit group: `list` or `show` alone, or every command once another is asked for."""

    def _full(self) -> click.Group:
        from gateway.cli.audit_cmd import audit_group as full
        from gateway.cli.receipt_cmd import attach
        from gateway.cli.retention_cmd import attach as attach_retention

        if "prove" not in full.commands:
            attach(full)  # prove, tree-head, check-receipt, verify --from/--to
            attach_retention(full)  # purge, erase, hold, release, holds
        return full

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._full().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "list":
            from gateway.cli.audit_list_cmd import list_command

            return list_command
        if cmd_name == "show":
            from gateway.cli.audit_show_cmd import show_command

            return show_command
        return self._full().get_command(ctx, cmd_name)


@click.group("audit", cls=LazyAuditGroup)
def audit_group() -> None:
    """List, show, verify, checkpoint and export the audit log."""
