"""`gateway keys`: the caller keys `gateway serve` accepts, issued and revoked on the record.

    $ gateway keys create --caller payments-svc       # prints the key once; stores its hash
    $ gateway keys create --caller desk-7 --task general_assistant   # with a default task
    $ gateway keys list [--format json]               # caller, record and checkpoint keys
    $ gateway keys revoke key_0123456789abcdef
    $ gateway keys rotate-caller key_0123456789abcdef --grace 24h   # both work for 24 h
    $ gateway keys new record --out keys/record.key   # and keys/record.key.pub
    $ gateway keys rotate-record --retire ed25519:0123456789abcdef   # with the new key set
    $ gateway keys rotate-checkpoint --retire keys/checkpoint-old.key.pub \\
          --old-key keys/checkpoint-old.key                                  # both sign
    $ gateway keys public --out public-keys.json      # record, checkpoint, integrator keys
    $ gateway keys public --kind record --out record.pub   # one kind, one key a line

Each create and revoke is an audit event (caller_key, caller_key_revoked), signed like the
rest; a running server notices a new key at once and a revocation within
GATEWAY_SERVER_KEY_REFRESH_S seconds (10 by default).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from gateway._inputs import read_text_file
from gateway.callers import CallerKey, CallerKeys
from gateway.cli._context import settings_of
from gateway.cli._render import echo_json, shown, text_table
from gateway.errors import InputError
from gateway.evidence import KeyListing, key_listing, rotate_checkpoint_key, rotate_record_key
from gateway.keys import KEY_USES, KeyKind, new_key_file, public_keys, public_keys_text


@click.group("keys")
def keys_group() -> None:
    """Caller keys for `gateway serve`."""


@keys_group.command("create")
@click.option("--caller", required=True, help="The calling service the key speaks for.")
@click.option(
    "--task",
    default=None,
    help="The task its requests go to when they name none (no x-gateway-task header, and a "
    "`model` that is neither a task nor a routed model id).",
)
@click.option(
    "--signer-trusted",
    is_flag=True,
    help="The servers list this process's record key in GATEWAY_TRUSTED_KEYS: issue the key "
    "even though the servers sign their requests with other keys.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def create_command(
    ctx: click.Context, caller: str, task: str | None, signer_trusted: bool, fmt: str
) -> None:
    """Issue a key for CALLER; it is printed once and only its hash is kept."""
    with CallerKeys.open(settings_of(ctx)) as keys:
        issued = keys.create(caller, task=task, signer_trusted=signer_trusted)
    if fmt == "json":
        echo_json(
            {
                "key_id": issued.key_id,
                "caller": issued.caller,
                "key": issued.key,
                "seq": issued.seq,
                "task": issued.task,
                "signed_by": issued.signed_by,
                "signer_checked": issued.signer_checked,
            }
        )
    else:
        click.echo(issued.key)
        default = f", default task {shown(issued.task)}" if issued.task else ""
        click.echo(
            f"[key {issued.key_id} for caller {shown(issued.caller)}{default}, recorded at seq "
            f"{issued.seq}; shown once, store it now]",
            err=True,
        )
    if not issued.signer_checked and not signer_trusted:
        click.echo(_unchecked_signer_note(issued.signed_by), err=True)


def _unchecked_signer_note(signed_by: str | None) -> str:
    """What `keys create` says when nothing on the log tells which record keys the servers
    sign with (no request recorded yet): it could not check that they trust this key."""
    return (
        f"note: no request is on the record yet, so it cannot be checked that the servers "
        f"trust the record key that signed this caller key ({signed_by or 'unknown'}); a "
        "server that does not trust it refuses the key (401) on every request. Make sure "
        "every server signs with this record key (GATEWAY_RECORD_KEY_FILE) or lists its "
        "public half in GATEWAY_TRUSTED_KEYS (`gateway keys list` shows the trusted keys)."
    )


@keys_group.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include revoked caller keys.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def list_command(ctx: click.Context, show_all: bool, fmt: str) -> None:
    """Every key a server would trust: the caller keys (active ones unless --all: id,
    caller, dates; never a key), the record keys (this gateway's own and GATEWAY_TRUSTED_KEYS:
    the seqs each signed, and its retirement) and the checkpoint keys (the configured one and
    those key rotations on the log name). Public halves only."""
    settings = settings_of(ctx)
    with CallerKeys.open(settings, create=False) as keys:
        found = [k for k in keys.list() if show_all or k.active]
    trusted = key_listing(settings)
    if fmt == "json":
        echo_json(
            {
                "caller_keys": [_json(k) for k in found],
                "record_keys": [k._asdict() for k in trusted.record],
                "checkpoint_keys": [k._asdict() for k in trusted.checkpoint],
            }
        )
        return
    rows = [
        [
            k.key_id,
            k.caller,
            k.task or "-",
            f"{k.created_at:%Y-%m-%d %H:%M:%S} (seq {k.created_seq})",
            _status(k),
        ]
        for k in found
    ]
    click.echo("CALLER KEYS")
    click.echo(text_table(["KEY ID", "CALLER", "TASK", "CREATED", "STATUS"], rows))
    click.echo(_trusted_text(trusted))


def _status(key: CallerKey) -> str:
    if key.revoked_seq is None:
        return "active"
    if key.in_grace and key.grace_until is not None:
        return (
            f"rotated to {key.replaced_by} (seq {key.revoked_seq}); accepted until "
            f"{key.grace_until:%Y-%m-%d %H:%M:%S %Z}"
        )
    assert key.revoked_at is not None
    return f"revoked {key.revoked_at:%Y-%m-%d %H:%M:%S} (seq {key.revoked_seq})"


def _seqs(first: int | None, last: int | None) -> str:
    return "none yet" if first is None else f"{first}-{last}"


def _trusted_text(listing: KeyListing) -> str:
    record = [
        [
            k.key_id,
            "this gateway's" if k.source == "signer" else "trusted",
            _seqs(k.first_seq, k.last_seq),
            "-" if k.retired_seq is None else f"from seq {k.retired_seq} (by {k.retired_by})",
        ]
        for k in listing.record
    ]
    checkpoint = [
        [
            k.key_id,
            "configured" if k.configured else "on the log",
            "-" if k.since_seq is None else str(k.since_seq) + _endorsement(k.endorsed),
            "-" if k.retired_seq is None else f"from seq {k.retired_seq}",
        ]
        for k in listing.checkpoint
    ]
    return (
        "\nRECORD KEYS\n"
        + text_table(["KEY ID", "WHY TRUSTED", "SIGNED SEQS", "RETIRED"], record)
        + "\n\nCHECKPOINT KEYS\n"
        + text_table(["KEY ID", "WHY", "SINCE SEQ", "RETIRED"], checkpoint)
    )


@keys_group.command("revoke")
@click.argument("key_id")
@click.option("--reason", help="Why, recorded with the revocation.")
@click.pass_context
def revoke_command(ctx: click.Context, key_id: str, reason: str | None) -> None:
    """Revoke KEY_ID: the server refuses it from its next key refresh on."""
    with CallerKeys.open(settings_of(ctx), create=False) as keys:
        revoked = keys.revoke(key_id, reason=reason)
    click.echo(
        f"revoked {revoked.key_id} (caller {shown(revoked.caller)}) at seq {revoked.revoked_seq}"
    )


def _json(key: CallerKey) -> dict[str, object]:
    return {
        "key_id": key.key_id,
        "caller": key.caller,
        "task": key.task,
        "key_hash": key.key_hash,
        "created_at": key.created_at.isoformat(),
        "created_seq": key.created_seq,
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
        "revoked_seq": key.revoked_seq,
        "grace_until": key.grace_until.isoformat() if key.grace_until else None,
        "replaced_by": key.replaced_by,
        "active": key.active,
    }


@keys_group.command("rotate-record")
@click.option(
    "--retire",
    required=True,
    metavar="KEY",
    help="The old record key to retire: its key id (ed25519:...) or public key.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def rotate_record_command(ctx: click.Context, retire: str, fmt: str) -> None:
    """Retire the old record KEY on the record, signed by the configured (new) record key:
    from this event's seq on, anything the old key signs is refused (docs/security.md)."""
    rotation = rotate_record_key(settings_of(ctx), retire=retire)
    if fmt == "json":
        echo_json(rotation._asdict())
        return
    click.echo(
        f"key {rotation.retired_key_id} retired from seq {rotation.seq} "
        f"(rotation signed by {rotation.key_id}); keep its public key trusted for its "
        "earlier events."
    )


@keys_group.command("rotate-caller")
@click.argument("key_id")
@click.option(
    "--grace",
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="How long the old key keeps working beside the new one (30m, 24h, 7d; 0: refused "
    "at once).",
)
@click.option(
    "--signer-trusted",
    is_flag=True,
    help="As for `keys create`: the servers trust this process's record key.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def rotate_caller_command(
    ctx: click.Context, key_id: str, grace: str, signer_trusted: bool, fmt: str
) -> None:
    """Replace caller key KEY_ID by a new key for the same caller and task: the new key is
    printed once; the old one is accepted until the grace ends, then refused (both steps
    are one recorded event pair: the new key, and the old key's revocation with its end)."""
    period = parse_grace(grace)
    with CallerKeys.open(settings_of(ctx)) as keys:
        issued, old = keys.rotate(key_id, grace=period, signer_trusted=signer_trusted)
    until = old.grace_until.isoformat() if old.grace_until else None
    if fmt == "json":
        echo_json(
            {
                "key_id": issued.key_id,
                "caller": issued.caller,
                "key": issued.key,
                "seq": issued.seq,
                "task": issued.task,
                "replaces": old.key_id,
                "old_key_refused_from": until or "now",
                "revocation_seq": old.revoked_seq,
            }
        )
    else:
        click.echo(issued.key)
        ends = f"accepted until {until}" if until else "refused from now on"
        click.echo(
            f"[key {issued.key_id} for caller {shown(issued.caller)} replaces {old.key_id} "
            f"(recorded at seq {issued.seq}); the old key is {ends} (seq {old.revoked_seq}); "
            "shown once, store it now]",
            err=True,
        )
    if not issued.signer_checked and not signer_trusted:
        click.echo(_unchecked_signer_note(issued.signed_by), err=True)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_grace(text: str) -> timedelta:
    """A grace period: a number with s, m, h or d (a bare number: seconds)."""
    value = text.strip().lower()
    unit = value[-1:] if value[-1:] in _UNITS else "s"
    number = value[:-1] if value[-1:] in _UNITS else value
    try:
        amount = float(number)
    except ValueError:
        amount = -1.0
    if not amount >= 0 or amount * _UNITS[unit] > 366 * 86400:
        raise InputError(
            f"--grace {text[:40]!r} is not a duration.",
            hint="Give a number with s, m, h or d, at most 366d (e.g. 30m, 24h, 7d; 0: none).",
        )
    return timedelta(seconds=amount * _UNITS[unit])


def _endorsement(endorsed: bool | None) -> str:
    # A new key its predecessor did not sign over to: the record key's holder alone named it.
    return " (not endorsed by the key it replaced)" if endorsed is False else ""


@keys_group.command("rotate-checkpoint")
@click.option(
    "--retire",
    required=True,
    metavar="KEY",
    help="The old checkpoint key to retire: its public key (hex) or a file holding it (its "
    ".pub file).",
)
@click.option(
    "--old-key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The old checkpoint key's secret file: it signs the hand-over to the new key.",
)
@click.option(
    "--unsafe-old-key-lost",
    is_flag=True,
    help="The old key is lost: record the rotation without its signature (the new key is "
    "then listed as not endorsed by it).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def rotate_checkpoint_command(
    ctx: click.Context, retire: str, old_key: Path | None, unsafe_old_key_lost: bool, fmt: str
) -> None:
    """Retire the old checkpoint KEY on the record in favour of the configured
    GATEWAY_CHECKPOINT_KEY (the new key), signed by both: from this event's seq on, the old
    key signs no checkpoint; auditors learn the new public key from the log (`gateway keys
    list`)."""
    secret = read_text_file(old_key, "old checkpoint key") if old_key is not None else None
    if secret is None and unsafe_old_key_lost:
        click.echo(
            "warning: rotating without the old key's signature: auditors see the new key as "
            "not endorsed by it.",
            err=True,
        )
    rotation = rotate_checkpoint_key(
        settings_of(ctx),
        retire=retire,
        old_key=secret,
        unsafe_old_key_lost=unsafe_old_key_lost,
    )
    if fmt == "json":
        echo_json(rotation._asdict())
        return
    click.echo(
        f"checkpoint key {rotation.retired_key_id} retired from seq {rotation.seq} in favour "
        f"of {rotation.key_id}; keep the old public key for the checkpoints it signed before, "
        "and give auditors the new one (`gateway keys public --kind checkpoint`)."
    )


@keys_group.command("new")
@click.argument("kind", type=click.Choice([k.value for k in KeyKind]))
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The private key file to write (mode 0600); never overwritten.",
)
@click.option(
    "--public-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where its public key goes (default: OUT.pub).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def new_command(kind: str, out: Path, public_out: Path | None, fmt: str) -> None:
    """Make a new Ed25519 KIND key in OUT (mode 0600) and its public key in OUT.pub.

    KIND: record (signs audit events), checkpoint (checkpoints and receipts), integrator
    (format 2), witness (cosignatures), approver (one person's policy approvals)."""
    made = new_key_file(KeyKind(kind), out, public_out)
    if fmt == "json":
        echo_json(
            {
                "kind": made.kind.value,
                "key_file": str(made.path),
                "public_key_file": str(made.public_path),
                "public_key": made.public_key,
                "key_id": made.key_id,
            }
        )
        return
    use = KEY_USES[made.kind]
    click.echo(made.public_key)
    click.echo(
        f"[{made.kind.value} key {made.key_id} written to {str(made.path)!r} (mode 0600), "
        f"its public key to {str(made.public_path)!r}]\n"
        f"  private: {use.private.format(key=made.path)}; keep it in a secret store\n"
        f"  public:  {use.public}",
        err=True,
    )


@keys_group.command("public")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to write (default: standard output).",
)
@click.option(
    "--kind",
    type=click.Choice(["record", "checkpoint", "integrator"]),
    help="Only this kind's keys, one a line (what --public-key FILE reads); default: every "
    "kind, apart, as JSON (what verifier/verify_evidence.py --keys reads).",
)
@click.pass_context
def public_command(ctx: click.Context, out: Path | None, kind: str | None) -> None:
    """Write the public keys an auditor checks this gateway's evidence with: the record keys
    verify trusts, the checkpoint key's public half and the integrator keys. Never a
    private key."""
    keys = public_keys(settings_of(ctx))
    text = public_keys_text(keys, kind)
    if out is None:
        click.echo(text, nl=False)
        return
    out.write_text(text, encoding="utf-8")
    counts = ", ".join(f"{len(keys.of(k))} {k}" for k in (kind,) if k) or (
        f"{len(keys.record)} record, {len(keys.checkpoint)} checkpoint, "
        f"{len(keys.integrator)} integrator"
    )
    click.echo(f"public keys ({counts}) written to {shown(out)}", err=True)
