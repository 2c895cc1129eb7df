"""The record key that signs every audit event this gateway writes, and the keys it trusts.

    signer = record_signer(settings, create=True)      # None: nothing to sign with yet
    trusted = trusted_record_keys(settings, signer)    # its own key, plus configured ones
    integrators = integrator_keys(settings)            # format 2: voids and checkpoints only

Order: ``record_key`` (GATEWAY_RECORD_KEY), then ``record_key_file``, then, for SQLite only,
``gateway-record.key`` beside the database file, made once (mode 0600). PostgreSQL needs one
of the first two: there is no folder beside it to keep a key in. The private key is never
written to the database or logs (docs/security.md says where a bank keeps it).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from audit.store import sqlite_path
from audit.store.signing import KEY_HINT, Signer, TrustedKeys, UnusableKey, create_key_file
from gateway.errors import AuditUnavailable, ConfigurationError, InputError
from gateway.settings import Settings

__all__ = [
    "RECORD_KEY_FILE",
    "integrator_keys",
    "read_public_keys",
    "record_key_path",
    "record_signer",
    "trusted_record_keys",
]

# The embedded default's record key: next to the SQLite database, never inside it.
RECORD_KEY_FILE = "gateway-record.key"


def record_key_path(settings: Settings) -> Path | None:
    """Where the record key file is: ``record_key_file``, else ``gateway-record.key`` next to
    a SQLite database; None for another database without one (it must be configured)."""
    if settings.record_key_file is not None:
        return settings.record_key_file
    database = sqlite_path(settings.database_url)
    return database.parent / RECORD_KEY_FILE if database is not None else None


def record_signer(settings: Settings, *, create: bool) -> Signer | None:
    """The record key that signs this gateway's audit events (never logged or stored).

    ``record_key`` wins, then ``record_key_file`` (which must exist), then the embedded
    default, ``gateway-record.key`` next to the SQLite database: read if it is there, made
    (mode 0600) if not and ``create`` - a writer's first use. Without ``create`` a missing
    default file is None: read-only commands create nothing. A database that is not SQLite
    needs a configured key before anything is written (:class:`ConfigurationError`).
    """
    if settings.record_key is not None:
        try:
            return Signer.from_text(settings.record_key.get_secret_value())
        except UnusableKey:
            raise ConfigurationError(
                "the record key (GATEWAY_RECORD_KEY) is not usable.", hint=KEY_HINT
            ) from None
    path = record_key_path(settings)
    if path is None:
        if not create:
            return None
        raise ConfigurationError(
            "no record key is configured, and every audit event must be signed.",
            hint="Set GATEWAY_RECORD_KEY_FILE (or GATEWAY_RECORD_KEY) to the gateway's "
            "Ed25519 record key, kept outside the database (docs/security.md).",
        )
    try:
        return Signer.from_file(path)
    except FileNotFoundError:
        if settings.record_key_file is not None:
            raise ConfigurationError(
                f"the record key file {str(path)!r} does not exist.",
                hint="Point GATEWAY_RECORD_KEY_FILE at the gateway's record key.",
            ) from None
        if not create or not path.parent.is_dir():
            return None  # nothing to sign yet; a missing folder is the database's error
    except UnusableKey:
        raise ConfigurationError(
            f"the record key file {str(path)!r} does not hold a usable key.", hint=KEY_HINT
        ) from None
    except PermissionError as exc:
        if settings.record_key_file is None:
            # The key beside the database is part of what it takes to write that database:
            # a process that may not read it may not write the log (like a read-only file).
            raise AuditUnavailable(
                f"this process cannot use the audit database's record key {str(path)!r} "
                f"({exc.strerror}), so it cannot write the audit log.",
                hint="Run the gateway as the user that owns the audit database and its key, "
                "or set GATEWAY_RECORD_KEY_FILE.",
            ) from None
        raise _unreadable_key(path, exc) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable_key(path, exc) from None
    try:
        return create_key_file(path)
    except FileExistsError:
        return Signer.from_file(path)  # another process made it first
    except OSError as exc:
        raise ConfigurationError(
            f"cannot create the record key file {str(path)!r}: {exc.strerror}.",
            hint="Make the folder writable, or set GATEWAY_RECORD_KEY_FILE.",
        ) from None


def _unreadable_key(path: Path, exc: OSError | UnicodeDecodeError) -> ConfigurationError:
    reason = exc.strerror if isinstance(exc, OSError) else "it is not text"
    return ConfigurationError(f"cannot read the key file {str(path)!r}: {reason}.")


def public_keys_given(values: tuple[str, ...]) -> list[str]:
    """Each ``--public-key`` value: a file of keys (one a line) if one is there, else a key."""
    keys: list[str] = []
    for value in values:
        path = Path(value)
        keys += read_public_keys(path) if path.is_file() else [value]
    return keys


def read_public_keys(path: Path) -> list[str]:
    """The public keys in a file: one a line (hex or base64), blank lines and ``#`` comments
    skipped. :class:`InputError` names the file and line of anything that is not a key."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise InputError(f"cannot read the public key file {str(path)!r}: {reason}.") from None
    keys = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            TrustedKeys.of([text])
        except UnusableKey:
            raise InputError(
                f"line {number} of {str(path)!r} is not an Ed25519 public key.",
                hint="A public key is 32 bytes as 64 hex characters (or base64), one a line.",
            ) from None
        keys.append(text)
    return keys


def trusted_record_keys(
    settings: Settings, signer: Signer | None, extra: Iterable[str] = ()
) -> TrustedKeys:
    """The public keys whose record signatures are accepted: this gateway's own (its
    ``signer``), ``trusted_keys``, the keys in ``trusted_keys_file`` and ``extra``."""
    texts = list(settings.trusted_keys)
    if settings.trusted_keys_file is not None:
        try:
            texts += read_public_keys(settings.trusted_keys_file)
        except InputError as exc:
            raise ConfigurationError(exc.message, hint=exc.hint) from None
    texts += extra
    if signer is not None:
        texts.append(signer.public_key)
    try:
        keys = TrustedKeys.of(texts)
    except UnusableKey as exc:
        raise ConfigurationError(
            f"GATEWAY_TRUSTED_KEYS is not usable: {exc}",
            hint="List public keys (64 hex characters each), comma-separated.",
        ) from None
    integrators = integrator_keys(settings)
    if integrators is None:
        return keys
    # An integrator key is never a record key, even where an operator lists it as one (as
    # the docs once said to): the read path would otherwise serve an answer it signed.
    return TrustedKeys.of([k.public_key for k in keys if k.public_key not in integrators])


def integrator_keys(settings: Settings) -> TrustedKeys | None:
    """The format-2 integrator's public keys (``integrator_public_keys``), None if unset."""
    if not settings.integrator_public_keys:
        return None
    try:
        return TrustedKeys.of(settings.integrator_public_keys)
    except UnusableKey as exc:
        raise ConfigurationError(
            f"GATEWAY_INTEGRATOR_PUBLIC_KEYS is not usable: {exc}",
            hint="List the integrator's public keys (64 hex characters each), comma-separated "
            "(the public half of `gateway audit integrate --key`).",
        ) from None
