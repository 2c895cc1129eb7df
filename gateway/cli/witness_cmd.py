"""`gateway audit witness`: a second, independent key cosigns a tree checkpoint.

    $ export GATEWAY_WITNESS_KEY=...          # the witness's own key, never the log's
    $ gateway audit witness head.json --name witness.bank.example/w1 \\
          --state w1-state.json --log-key 3b6a27bc...
    $ gateway audit check-receipt receipt.json --public-key 3b6a... \\
          --witness-key witness.bank.example/w1=9f1c...

Parses, calls :mod:`gateway.evidence`, renders; a refusal (a fork, a rollback, a bad log
signature) is one line of reason and exit 1, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import click

from gateway.cli._boundary import CheckFailed
from gateway.cli._context import settings_of
from gateway.cli._render import echo_json, shown
from gateway.evidence import WitnessOutcome, witness
from gateway.keys import public_keys_given

__all__ = ["witness_command"]


@click.command("witness")
@click.argument("checkpoint_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    envvar="GATEWAY_WITNESS_KEY",
    required=True,
    metavar="KEY",
    help="The witness's Ed25519 private key: 64 hex characters, or a file holding them "
    "(default: GATEWAY_WITNESS_KEY). Independent of the log's checkpoint key.",
)
@click.option(
    "--name",
    required=True,
    help="The witness's name in its cosignature line, e.g. witness.bank.example/w1.",
)
@click.option(
    "--state",
    "state_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The witness's state file: the last tree it cosigned per log (made on first use).",
)
@click.option(
    "--log-key",
    "log_keys",
    multiple=True,
    required=True,
    metavar="KEY",
    help="A public key of the log's GATEWAY_CHECKPOINT_KEY (hex, or a file of keys). "
    "Repeatable; only checkpoints signed by one of these are cosigned.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the cosigned file (default: back into CHECKPOINT_FILE).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def witness_command(
    ctx: click.Context,
    checkpoint_file: Path,
    key: str,
    name: str,
    state_file: Path,
    log_keys: tuple[str, ...],
    output: Path | None,
    fmt: str,
) -> None:
    """Cosign a tree checkpoint (a tree-head file or a receipt) as a witness: only if it is
    signed by a trusted log key and consistently extends the last tree of that log this
    witness cosigned (the consistency proof comes from GATEWAY_DATABASE_URL and is checked
    against both roots). Exit 0 cosigned, 1 refused with the reason."""
    keys = public_keys_given(log_keys)
    outcome = witness(settings_of(ctx), checkpoint_file, key, name, state_file, keys, output)
    _print(outcome, fmt)
    if outcome.refused is not None:
        raise CheckFailed()


def _print(outcome: WitnessOutcome, fmt: str) -> None:
    if fmt == "json":
        value = outcome._asdict()
        value["previous"] = outcome.previous.model_dump() if outcome.previous else None
        value["written"] = str(outcome.written) if outcome.written else None
        echo_json(value)
        return
    tree = f"the tree of {outcome.tree_size} events of {shown(outcome.origin)}"
    if outcome.refused is not None:
        click.echo(f"WITNESS REFUSED {tree}: {shown(outcome.refused)}")
        return
    before = outcome.previous
    if before is None:
        since = "the first tree of this log this witness cosigns: nothing earlier to check"
    elif before.tree_size == outcome.tree_size:
        since = "the same tree this witness cosigned before, cosigned again now"
    else:
        since = f"it extends the tree of {before.tree_size} events this witness cosigned before"
    click.echo(f"cosigned {tree} (root {outcome.root}): {since}")
    click.echo(f"witness {shown(outcome.name)} key {outcome.public_key}")
    click.echo(f"  readers pass: --witness-key {shown(outcome.name)}={outcome.public_key}")
    click.echo(f"written to {shown(str(outcome.written))}")
