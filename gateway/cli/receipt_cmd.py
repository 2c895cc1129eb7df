"""`gateway audit prove`, `tree-head`, `check-receipt` and `verify --from/--to`: Merkle receipts.

    $ gateway audit prove req-1 -o receipt.json
    $ gateway audit check-receipt receipt.json --public-key 3b6a27bc...   # offline
    $ gateway audit tree-head -o head-2026-11.json
    $ gateway audit verify --from head-2026-10.json --to head-2026-11.json

:func:`attach` adds the commands to the ``audit`` group and gives its ``verify`` the
``--from``/``--to`` options (a consistency proof between two checkpoints); without them
``verify`` is unchanged. Each command parses, calls :mod:`gateway.evidence` and renders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from gateway.cli._boundary import CheckFailed
from gateway.cli._context import settings_of
from gateway.cli._render import echo_json, open_output, shown
from gateway.cli.timestamp_cmd import TSA_CERT, timestamp_command
from gateway.cli.witness_cmd import witness_command
from gateway.evidence import (
    ConsistencyReport,
    ReceiptReport,
    TimeStampCheck,
    WitnessCheck,
    check_consistency,
    check_receipt,
    note_verifier_key,
    prove,
    receipt_text,
    tree_checkpoint_text,
    tree_head,
)
from gateway.keys import public_keys_given, read_public_keys

__all__ = ["attach"]

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


_WITNESS_KEY = click.option(
    "--witness-key",
    "witness_keys",
    multiple=True,
    metavar="NAME=KEY",
    help="Require a valid cosignature by this witness (its name and 64-hex public key, as "
    "`gateway audit witness` prints, or its vkey). Repeatable: every one is required.",
)


def _time_lines(checks: Sequence[TimeStampCheck], label: str = "") -> None:
    for check in checks:
        if check.ok and check.time is not None:
            when = check.time.strftime("%Y-%m-%dT%H:%M:%SZ")
            click.echo(
                f"{label}time-stamped {when} by {shown(check.tsa)} (serial {check.serial}), "
                "a TSA the given --tsa-cert certifies"
            )


def _witness_lines(checks: Sequence[WitnessCheck], label: str = "") -> None:
    for check in checks:
        if check.ok and check.cosigned_at is not None:
            when = datetime.fromtimestamp(check.cosigned_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            click.echo(f"{label}cosigned by witness {shown(check.name)} at {when}")


@click.command("prove")
@click.argument("request_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def prove_command(ctx: click.Context, request_id: str, output: Path | None) -> None:
    """Write a receipt: each event of REQUEST_ID with its inclusion proof against a
    checkpoint of the whole log (C2SP signed note, GATEWAY_CHECKPOINT_KEY). On a format-2
    log, against the newest checkpoint the integrator signed that covers them (trusted:
    GATEWAY_INTEGRATOR_PUBLIC_KEYS); a request not yet covered is refused until `gateway
    audit integrate` checkpoints it. Anyone with the signer's public key can check the
    receipt offline with `gateway audit check-receipt`."""
    receipt = prove(settings_of(ctx), request_id)
    with open_output(output) as out:
        out.write(receipt_text(receipt))
    cp = receipt.checkpoint
    click.echo(
        f"receipt for request {shown(request_id)}: {len(receipt.events)} event(s) proven in "
        f"the tree of {cp.tree_size} events (root {cp.root}); signer "
        f"{shown(note_verifier_key(cp))}",
        err=True,
    )


@click.command("tree-head")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--rebuild",
    is_flag=True,
    help="Recompute the stored Merkle tree from the log first (after a refused proof; on "
    "PostgreSQL run as the owner of the tables).",
)
@click.option(
    "--proof-from",
    "proof_from",
    type=_FILE,
    help="An earlier tree head (or receipt) of this log: sign only if the new head extends "
    "it, and carry the consistency proof so a witness without the database can check it.",
)
@click.pass_context
def tree_head_command(
    ctx: click.Context, output: Path | None, rebuild: bool, proof_from: Path | None
) -> None:
    """Write the log's Merkle tree head now, signed (GATEWAY_CHECKPOINT_KEY): keep it, and
    check a later one extends it with `gateway audit verify --from OLD --to NEW`. On a
    format-2 log, the head of the newest integrator checkpoint (its signed root, checked
    under GATEWAY_INTEGRATOR_PUBLIC_KEYS)."""
    head = tree_head(settings_of(ctx), rebuild=rebuild, proof_from=proof_from)
    with open_output(output) as out:
        out.write(tree_checkpoint_text(head))


@click.command("check-receipt")
@click.argument("receipt_file", type=_FILE)
@click.option(
    "--public-key",
    "public_keys",
    multiple=True,
    required=True,
    metavar="KEY",
    help="The checkpoint key's public half (a format-2 log's receipt: the integrator's): "
    "64 hex characters (or base64), or a file of such keys, one a line. Only these are "
    "trusted. Repeatable.",
)
@click.option(
    "--record-key",
    "record_keys",
    multiple=True,
    metavar="KEY",
    help="A gateway's record public key (GATEWAY_TRUSTED_KEYS), or a file of them: each "
    "event's record signature must be one of these keys'. Repeatable.",
)
@_WITNESS_KEY
@TSA_CERT
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def check_receipt_command(
    receipt_file: Path,
    public_keys: tuple[str, ...],
    record_keys: tuple[str, ...],
    witness_keys: tuple[str, ...],
    tsa_certs: tuple[Path, ...],
    fmt: str,
) -> None:
    """Check a receipt offline, without the database: each event's hash from its body, its
    inclusion proof, the checkpoint's signature, each required witness's cosignature and,
    with --record-key, each event's record signature; exit 0 if it checks out, 1 if not."""
    report = check_receipt(
        receipt_file,
        public_keys_given(public_keys),
        witness_keys,
        tsa_certs,
        public_keys_given(record_keys),
    )
    _print_receipt(report, fmt)
    if not report.ok:
        raise CheckFailed()


def _print_receipt(report: ReceiptReport, fmt: str) -> None:
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
        return
    seqs = ", ".join(map(str, report.seqs)) or "none"
    if report.ok:
        click.echo(
            f"receipt checks out: request {shown(report.request_id)}, events seq {seqs} are in "
            f"the log {shown(report.origin)} of {report.tree_size} events (root {report.root})"
        )
        click.echo(f"checkpoint signed by trusted key {report.signer}")
        if report.record_signatures_checked:
            click.echo("each event signed by a trusted record key")
        _witness_lines(report.witnesses)
        _time_lines(report.timestamps)
        return
    click.echo(f"RECEIPT REFUSED: {len(report.problems)} problem(s)")
    for problem in report.problems:
        click.echo(f"  {shown(problem)}")


def _print_consistency(report: ConsistencyReport, fmt: str) -> None:
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
        return
    if report.ok:
        click.echo(
            f"consistent: the tree of {report.new_size} events extends the tree of "
            f"{report.old_size} ({shown(report.origin)}; the log holds {report.log_size}); "
            f"consistency proof of {len(report.proof)} hash(es)"
        )
        _witness_lines(report.old_witnesses, "OLD ")
        _witness_lines(report.new_witnesses, "NEW ")
        _time_lines(report.old_timestamps, "OLD ")
        _time_lines(report.new_timestamps, "NEW ")
        return
    click.echo(f"INCONSISTENT: {len(report.problems)} problem(s)")
    for problem in report.problems:
        click.echo(f"  {shown(problem)}")


def _with_consistency(verify: click.Command) -> click.Command:
    """``verify`` with ``--from OLD --to NEW``: check NEW extends OLD (and nothing else)."""
    original: Callable[..., Any] | None = verify.callback
    assert original is not None
    verify.params += [
        click.Option(
            ["--from", "from_file"],
            type=_FILE,
            help="An older tree checkpoint (or receipt): with --to, prove the newer extends it.",
        ),
        click.Option(
            ["--to", "to_file"],
            type=_FILE,
            help="A newer tree checkpoint (or receipt), checked to extend --from.",
        ),
        click.Option(
            ["--witness-key", "witness_keys"],
            multiple=True,
            metavar="NAME=KEY",
            help="With --from/--to: require this witness's cosignature on both. Repeatable.",
        ),
        click.Option(
            ["--tsa-cert", "tsa_certs"],
            multiple=True,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="With --from/--to: require on both a time-stamp by a TSA this PEM CA "
            "certifies. Repeatable.",
        ),
    ]

    def callback(
        from_file: Path | None,
        to_file: Path | None,
        witness_keys: tuple[str, ...],
        tsa_certs: tuple[Path, ...],
        **params: Any,
    ) -> Any:
        if from_file is None and to_file is None:
            if witness_keys or tsa_certs:
                raise click.UsageError("--witness-key and --tsa-cert go with --from and --to.")
            return original(**params)
        ctx = click.get_current_context()
        if from_file is None or to_file is None:
            raise click.UsageError("--from and --to go together.")
        others = [k for k, v in params.items() if k not in ("public_key_files", "fmt") and v]
        if others:
            raise click.UsageError("--from/--to take only --public-key and --format.")
        keys = [k for path in params["public_key_files"] for k in read_public_keys(path)]
        report = check_consistency(
            settings_of(ctx), from_file, to_file, keys, witness_keys, tsa_certs
        )
        _print_consistency(report, params["fmt"])
        if not report.ok:
            raise CheckFailed()
        return None

    verify.callback = callback
    verify.help = (verify.help or "") + (
        "\n\nWith --from OLD --to NEW (tree checkpoints or receipts), prove from the log that "
        "NEW extends OLD instead: a forked, rewritten or truncated log is refused."
    )
    return verify


def attach(audit_group: click.Group) -> None:
    commands = (
        prove_command,
        tree_head_command,
        check_receipt_command,
        witness_command,
        timestamp_command,
    )
    for command in commands:
        audit_group.add_command(command)
    verify = audit_group.commands.get("verify")
    if verify is not None:
        _with_consistency(verify)
