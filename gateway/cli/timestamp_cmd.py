"""`gateway audit timestamp`: an RFC 3161 time-stamping authority's token on a checkpoint.

    $ gateway audit timestamp head.json --tsa https://tsa.bank.example/tsr --tsa-cert tsa-ca.pem
    $ gateway audit check-receipt receipt.json --public-key 3b6a... --tsa-cert tsa-ca.pem

Parses, calls :mod:`gateway.evidence`, renders.
"""

from __future__ import annotations

from pathlib import Path

import click

from gateway.cli._render import echo_json, shown
from gateway.evidence import timestamp

__all__ = ["TSA_CERT", "timestamp_command"]

TSA_CERT = click.option(
    "--tsa-cert",
    "tsa_certs",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A PEM file of the certification authority whose time-stamping authorities are "
    "trusted. Given: a time-stamp by such a TSA is required, and its time is reported. "
    "Repeatable.",
)


@click.command("timestamp")
@click.argument("checkpoint_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tsa", required=True, metavar="URL", help="The TSA's RFC 3161 URL (http/https).")
@TSA_CERT
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the stamped file (default: back into CHECKPOINT_FILE).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def timestamp_command(
    checkpoint_file: Path,
    tsa: str,
    tsa_certs: tuple[Path, ...],
    output: Path | None,
    fmt: str,
) -> None:
    """Ask a time-stamping authority for an RFC 3161 token over a tree checkpoint's signed
    text (a tree-head file or a receipt) and keep it in the file: proof that the tree
    existed by the TSA's time. With --tsa-cert the token is checked before it is kept."""
    outcome = timestamp(checkpoint_file, tsa, tsa_certs, output)
    if fmt == "json":
        value = outcome._asdict()
        value["time"] = outcome.time.isoformat() if outcome.time else None
        value["written"] = str(outcome.written)
        echo_json(value)
        return
    tree = f"the tree of {outcome.tree_size} events of {shown(outcome.origin)}"
    if outcome.verified and outcome.time is not None:
        when = outcome.time.strftime("%Y-%m-%dT%H:%M:%SZ")
        click.echo(
            f"time-stamped {tree}: {when} by {shown(outcome.tsa)} (serial {outcome.serial}), "
            "checked against --tsa-cert"
        )
    else:
        click.echo(
            f"time-stamped {tree} by {shown(outcome.tsa)}; not checked (no --tsa-cert): "
            "check it with `check-receipt` or `verify --from/--to` and --tsa-cert"
        )
    click.echo(f"written to {shown(str(outcome.written))}")
