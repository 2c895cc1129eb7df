"""`gateway audit integrate`: link a format-2 log's committed events, extend its tree, checkpoint.

    $ export GATEWAY_AUDIT_FORMAT=2 GATEWAY_INTEGRATOR_KEY=...   # PostgreSQL only
    $ gateway audit integrate                 # runs until SIGTERM / Ctrl-C
    $ gateway audit integrate --once --format json

Parses, calls :mod:`gateway.evidence`, renders. Without ``--once`` it runs pass after
pass, ``--interval`` seconds apart (back to back while a backlog lasts), and stops cleanly on
SIGTERM or SIGINT (the pass in progress finishes; a final checkpoint is written).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

import click

from gateway.cli._context import settings_of
from gateway.cli._render import echo_json
from gateway.evidence import Step, integrate

__all__ = ["integrate_command"]


@click.command("integrate")
@click.option(
    "--key",
    envvar="GATEWAY_INTEGRATOR_KEY",
    required=True,
    metavar="KEY",
    help="The integrator's Ed25519 private key: 64 hex characters, or a file holding them "
    "(default: GATEWAY_INTEGRATOR_KEY). It signs checkpoints and the voids of dead writers.",
)
@click.option("--once", is_flag=True, help="Link what is committed (waiting out holes), then stop.")
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Seconds between passes (none while a backlog lasts): about the integration lag.",
)
@click.option(
    "--grace",
    "grace_s",
    type=click.FloatRange(min=0.0),
    default=30.0,
    show_default=True,
    help="Seconds a reserved seq may stay without its event before it is voided; longer "
    "than a writer's statement and idle-in-transaction timeouts.",
)
@click.option(
    "--checkpoint-every",
    "checkpoint_every_s",
    type=click.FloatRange(min=0.0),
    default=5.0,
    show_default=True,
    help="Seconds between signed checkpoints of the linked prefix.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def integrate_command(
    ctx: click.Context,
    key: str,
    once: bool,
    interval_s: float,
    grace_s: float,
    checkpoint_every_s: float,
    fmt: str,
) -> None:
    """Link format-2 events into the chain and sign checkpoints (PostgreSQL)."""
    stop = threading.Event()

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        step = integrate(
            settings_of(ctx),
            key,
            once=once,
            interval_s=interval_s,
            grace_s=grace_s,
            checkpoint_every_s=checkpoint_every_s,
            stop=stop,
            # As they come, on stderr (never event content: seqs and counts only).
            on_warning=lambda warning: click.echo(f"warning: {warning}", err=True),
        )
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    _render(step, fmt)


def _render(step: Step, fmt: str) -> None:
    summary: dict[str, Any] = {
        "linked": step.linked,
        "voided": step.voided,
        "head": step.head,
        "checkpoint_size": step.checkpoint,
        "races_lost": step.lost,  # passes another integrator linked first
        "warnings": list(step.warnings),
    }
    if fmt == "json":
        echo_json(summary)
        return
    made = f"; checkpoint at {step.checkpoint}" if step.checkpoint is not None else ""
    click.echo(f"linked {step.linked} event(s), voided {step.voided}; head {step.head}{made}")
