"""`gateway audit verify` and `gateway audit checkpoint`: is the log intact, and its signed head.

    $ gateway audit verify --checkpoint head.json --public-key auditor.pub
    $ gateway audit verify --write-verified verified.json     # later: --since-verified
    $ gateway audit verify --export slice.jsonl --public-key gateway.pub   # offline
    $ gateway audit checkpoint -o head.json

The audit group adds both commands (gateway.cli.audit_cmd); `verify --from/--to` is added to
this verify by gateway.cli.receipt_cmd. Each command parses, calls gateway.evidence, renders.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from audit.store.signing import key_id
from gateway.cli._boundary import CheckFailed
from gateway.cli._context import settings_of
from gateway.cli._render import Progress, echo_json, open_output, shown
from gateway.errors import ConfigurationError
from gateway.evidence import (
    Auditing,
    ExportVerifyReport,
    VerifyReport,
    checkpoint_text,
    verify_export,
)
from gateway.keys import read_public_keys

PROGRESS_THRESHOLD = 20_000  # below this a verify is over before a bar is worth drawing


UNPINNED_WARNING = (
    "WARNING: the checkpoint's signer {signer} is NOT a trusted key: it was accepted only "
    "because --unsafe-accept-unpinned-checkpoint was given, so it proves nothing about who "
    "made it."
)


def _unpinned(report: VerifyReport) -> str | None:
    if report.checkpoint_pinned is not False:
        return None
    return UNPINNED_WARNING.format(signer=report.checkpoint_signer or "(none: unsigned)")


def _trust_lines(report: VerifyReport) -> list[str]:
    """What the verify trusted, always said: which keys, legacy rows, the checkpoint."""
    if not report.signatures_checked:
        lines = ["record signatures: NOT checked (no trusted keys were given)"]
    elif report.trusted_keys:
        keys = ", ".join(f"{k.key_id} ({k.public_key})" for k in report.trusted_keys)
        lines = [f"record signatures checked against {len(report.trusted_keys)} key(s): {keys}"]
    else:
        lines = ["record signatures checked against NO trusted key: pass --public-key FILE"]
    if report.unsigned_allowed_before is not None:
        lines.append(
            f"unsigned events below seq {report.unsigned_allowed_before} accepted "
            f"(--allow-unsigned-before): {report.unsigned_allowed} found"
        )
    attested = report.signatures_attested
    if attested is not None and report.signatures_checked_from is not None:
        lines.append(
            f"record signatures of seq {report.signatures_checked_from}..{report.head_seq} "
            f"checked here; those of seq 1..{attested.seq} NOT checked again: they rest on "
            f"the verified checkpoint signed by {attested.public_key} at {attested.created_at} "
            f"(its hash at seq {attested.seq} matched, its keys and signature columns still hold)"
        )
    if report.sequenced_from is not None:  # format 2: what the integrator has not linked
        since = report.pending_since
        lines.append(
            f"format 2 from seq {report.sequenced_from}: head seq {report.head_seq} is the "
            f"last linked event; {report.pending_integration} event(s) pending integration"
            + (f" (checked; the oldest recorded at {since:%Y-%m-%d %H:%M:%S} UTC)" if since else "")
        )
        lines.append(_integrator_line(report))
    if report.erasure_events:
        lines.append(
            f"content erased by policy: {report.content_erased} payload(s) of "
            f"{report.erasure_events} request(s), each named by its erasure event"
        )
        lines.extend(
            f"  {n.request_id}: erased by policy (event seq {n.seq})" for n in report.erasures
        )
        if report.erasure_events > len(report.erasures):
            lines.append(f"  ... and {report.erasure_events - len(report.erasures)} more")
    if report.tree_root_checked:
        lines.append("Merkle tree root of the checkpoint recomputed from the log")
    if report.checkpoint_seq is not None:
        if report.checkpoint_pinned:
            lines.append(f"checkpoint signed by trusted key {report.checkpoint_signer}")
        elif (warning := _unpinned(report)) is not None:
            lines.append(warning)
    return lines


def _integrator_line(report: VerifyReport) -> str:
    """Format 2: which integrator keys its checkpoints and voids were checked against."""
    counted = (
        f"{report.integrator_checkpoints_checked} integrator checkpoint(s) and "
        f"{report.voids_checked} void(s) checked"
    )
    if not report.signatures_checked:
        return f"{counted}; their signatures NOT checked (no trusted keys were given)"
    if not report.integrator_keys:
        return (
            f"{counted} against NO integrator key: set GATEWAY_INTEGRATOR_PUBLIC_KEYS to the "
            "integrator's public key"
        )
    keys = ", ".join(f"{k.key_id} ({k.public_key})" for k in report.integrator_keys)
    return f"{counted} against {len(report.integrator_keys)} integrator key(s): {keys}"


def _print_report(report: VerifyReport, fmt: str) -> None:
    warning = _unpinned(report)
    if warning is not None:
        click.echo(warning, err=True)
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
        return
    if report.ok:
        tail = f", extends checkpoint seq {report.checkpoint_seq}" if report.checkpoint_seq else ""
        click.echo(
            f"intact: {report.events_checked} events, head seq {report.head_seq} "
            f"{shown(report.head_hash)}{tail}"
        )
    else:
        click.echo(
            f"DEFECTS: {len(report.defects)} found in {report.events_checked} events; "
            f"first bad seq {report.first_bad_seq}"
        )
        for d in report.defects[:SHOWN_DEFECTS]:
            seq = d.seq if d.seq is not None else "-"
            click.echo(f"  seq {seq}: {shown(d.kind.value)}: {shown(d.detail)}")
        _echo_cut(len(report.defects))
    for line in _trust_lines(report):
        click.echo(shown(line))


# The text report lists this many defects; the rest are counted (--format json lists all).
SHOWN_DEFECTS = 50


def _echo_cut(total: int) -> None:
    if total > SHOWN_DEFECTS:
        click.echo(
            f"  ... {total - SHOWN_DEFECTS} more defects not shown (the first {SHOWN_DEFECTS} "
            f"of {total} are above); --format json lists every one"
        )


@click.command("verify")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Also prove the log still contains and extends this checkpoint (format 2: the link "
    "and Merkle root at its seq).",
)
@click.option(
    "--public-key",
    "public_key_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file of Ed25519 public keys (hex, one a line) to trust for record signatures "
    "and checkpoints, besides the gateway's own and GATEWAY_TRUSTED_KEYS. Repeatable.",
)
@click.option(
    "--allow-unsigned-before",
    type=click.IntRange(min=1),
    metavar="SEQ",
    help="Accept unsigned events below SEQ: a log written before record signatures existed.",
)
@click.option(
    "--unsafe-accept-unpinned-checkpoint",
    is_flag=True,
    help="UNSAFE: accept a checkpoint signed by no trusted key (or unsigned); says so.",
)
@click.option(
    "--export",
    "export_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Verify this JSONL export offline instead of the database (needs --public-key).",
)
@click.option(
    "--integrator-public-key",
    "integrator_key_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --export: a file of the format-2 integrator's public keys (hex, one a line), "
    "trusted on voids and integrator checkpoints only. Repeatable.",
)
@click.option(
    "--since-verified",
    "since_verified",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A verified checkpoint (from --write-verified) by a trusted key: every link and "
    "lifecycle check is still made from seq 1, but record signatures only after its seq.",
)
@click.option(
    "--write-verified",
    "write_verified",
    type=click.Path(dir_okay=False, path_type=Path),
    help="If the log is intact, write a verified checkpoint of its head to this file, signed "
    "with GATEWAY_CHECKPOINT_KEY, for a later --since-verified.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    metavar="N",
    help="Worker processes that check pages of the log side by side (default: one per core "
    "on a log of 50,000 events or more; 1: in this process). The report is the same.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def verify_command(ctx: click.Context, /, **options: Any) -> None:
    """Recompute every hash, link and record signature and check each request's life;
    exit 0 if intact, 1 on any defect. Says which keys it trusted. With --export FILE, the
    same for an exported slice, without the database: only the given keys are trusted."""
    with _collector_off():
        _verify(ctx, **options)


@contextmanager
def _collector_off() -> Iterator[None]:
    """The walk makes no cycles, and the cyclic collector's passes still cost a tenth of a
    large verify's CPU with the heap set aside (AuditStore.verify): off for the command."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _verify(
    ctx: click.Context,
    *,
    checkpoint_file: Path | None,
    public_key_files: tuple[Path, ...],
    allow_unsigned_before: int | None,
    unsafe_accept_unpinned_checkpoint: bool,
    export_file: Path | None,
    integrator_key_files: tuple[Path, ...],
    since_verified: Path | None,
    write_verified: Path | None,
    jobs: int | None,
    fmt: str,
) -> None:
    keys = [key for path in public_key_files for key in read_public_keys(path)]
    if export_file is not None:
        if (
            checkpoint_file is not None
            or allow_unsigned_before
            or unsafe_accept_unpinned_checkpoint
            or since_verified is not None
            or write_verified is not None
            or jobs is not None
        ):
            raise click.UsageError(
                "--export takes only --public-key, --integrator-public-key and --format."
            )
        integrators = [key for path in integrator_key_files for key in read_public_keys(path)]
        exported = verify_export(export_file, keys, integrators)
        _print_export_report(exported, fmt)
        if not exported.ok:
            raise CheckFailed()
        return
    if integrator_key_files:
        raise click.UsageError(
            "--integrator-public-key is for --export; a database verify trusts "
            "GATEWAY_INTEGRATOR_PUBLIC_KEYS."
        )
    settings = settings_of(ctx)
    if write_verified is not None and settings.checkpoint_key is None:
        # Said before the walk, which may take an hour, not after it.
        raise ConfigurationError(
            "--write-verified signs with the checkpoint key, and GATEWAY_CHECKPOINT_KEY is "
            "not set.",
            hint="Set GATEWAY_CHECKPOINT_KEY (64 hex characters) and verify again.",
        )
    with (
        Auditing.open(settings) as auditing,
        Progress("verifying", threshold=PROGRESS_THRESHOLD) as progress,
    ):
        report = auditing.verify(
            checkpoint=checkpoint_file,
            trusted_keys=keys,
            allow_unsigned_before=allow_unsigned_before,
            unsafe_accept_unpinned_checkpoint=unsafe_accept_unpinned_checkpoint,
            progress=progress,
            since_verified=since_verified,
            measure_head=write_verified is not None,
            jobs=jobs,
        )
        written = None
        if write_verified is not None and report.ok:
            written = auditing.verified_checkpoint(report, rests_on=since_verified)
    _print_report(report, fmt)
    if written is not None and write_verified is not None:
        with open_output(write_verified) as out:
            out.write(checkpoint_text(written))
        click.echo(
            f"verified checkpoint at seq {written.seq} written to {shown(write_verified)}",
            err=True,
        )
    if not report.ok:
        raise CheckFailed()


def _export_checked(report: ExportVerifyReport) -> str:
    """What an export's verify checked, content included or not."""
    checked = "hashes, links and record signatures of every event"
    if not report.content_included:
        return f"{checked}; content not included (not checked)"
    return (
        f"{checked}; content of {report.content_checked} of {report.content_expected} "
        "request(s) against the digests their signed events carry"
    )


def _print_export_report(report: ExportVerifyReport, fmt: str) -> None:
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
        return
    span = f"seq {report.first_seq}-{report.last_seq}" if report.events_checked else "no events"
    export = (
        f"exported by {shown(report.reviewer or '-')} (EXPORT event seq {report.export_seq}, "
        f"head seq {report.upto_seq})"
        if report.export_seq is not None
        else "no EXPORT record"
    )
    filters = ", ".join(f"{k}={shown(v)}" for k, v in report.filters.items()) or "none"
    if report.ok:
        click.echo(f"intact: {report.events_checked} events ({span}), {export}")
        click.echo(f"checked: {_export_checked(report)}")
    else:
        click.echo(f"DEFECTS: {len(report.defects)} found in {report.events_checked} events")
        for d in report.defects[:SHOWN_DEFECTS]:
            seq = d.seq if d.seq is not None else "-"
            click.echo(f"  line {d.line} seq {seq}: {shown(d.kind)}: {shown(d.detail)}")
        _echo_cut(len(report.defects))
        click.echo(export)
        click.echo(f"checked: {_export_checked(report)}")
    click.echo(f"filters: {filters}")
    click.echo(
        "record signatures checked against "
        + ", ".join(shown(k) for k in report.trusted_keys)
        + " (offline: only --public-key keys are trusted)"
    )
    if report.sequenced_from is not None:
        integrators = ", ".join(shown(k) for k in report.integrator_keys) or (
            "NO integrator key: pass --integrator-public-key FILE"
        )
        click.echo(
            f"format 2 from seq {report.sequenced_from} (log {shown(report.store_id or '-')}): "
            f"{report.pending_integration} event(s) pending integration when exported; "
            f"{report.integrator_checkpoints_checked} integrator checkpoint(s) "
            f"({report.checkpoint_roots_checked} root(s) recomputed) and "
            f"{report.voids_checked} void(s) checked against {integrators}"
        )


@click.command("checkpoint")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--unsigned", is_flag=True, help="Write an unsigned head (no key configured).")
@click.pass_context
def checkpoint_command(ctx: click.Context, output: Path | None, unsigned: bool) -> None:
    """Record a checkpoint and write the signed head (GATEWAY_CHECKPOINT_KEY); says its seq,
    head hash, signer key id and where it wrote (on stderr: stdout may be the file). On a
    format-2 log the head is the integrator's newest checkpoint (checked under
    GATEWAY_INTEGRATOR_PUBLIC_KEYS): its size, link and root, signed again."""
    with Auditing.open(settings_of(ctx)) as auditing:
        head = auditing.checkpoint(unsigned=unsigned)
    with open_output(output) as out:
        out.write(checkpoint_text(head))
    signer = (
        f"signed by {key_id(bytes.fromhex(head.public_key))} (GATEWAY_CHECKPOINT_KEY)"
        if head.public_key is not None
        else "UNSIGNED (--unsigned)"
    )
    where = shown(output) if output is not None else "standard output"
    click.echo(
        f"checkpoint at seq {head.seq}, head {shown(head.hash)}, {signer}; written to {where}",
        err=True,
    )
