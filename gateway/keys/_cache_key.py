"""The cache key: the per-deployment secret under which a request's replay key is an HMAC.

    key = cache_key(settings, create=True)     # None: no key, plain request hashes
    keyed_request_hash(key, "sha256:ab...")    # "hmac-sha256:<64 hex>"

The replay key must stay deterministic (identical requests meet in the cache), so it cannot
be salted per request; keyed with a secret held outside the database, as the record key
is, the log alone no longer lets anyone confirm a guessed prompt by rebuilding its wire body
(docs/security.md, "What an erased request still reveals").

Order: ``cache_key`` (GATEWAY_CACHE_KEY), then ``cache_key_file``, then
``gateway-cache.key`` beside a configured record key file, then beside a SQLite database
file; made once (32 random bytes as hex, mode 0600) when a writer first needs it, and never
again over a log that already holds keyed hashes (a lost key is an error). None of
these (a PostgreSQL deployment whose record key is given inline), or a default place this
process may not write (a read-only secret mount; logged as ``cache_key_unavailable``): plain
hashes, as before.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from pathlib import Path

from audit.store import sqlite_path
from audit.store.signing import write_new_secret
from gateway._log import log
from gateway.errors import ConfigurationError
from gateway.settings import Settings

__all__ = [
    "CACHE_KEY_FILE",
    "KEYED_PREFIX",
    "CacheKey",
    "cache_key",
    "keyed_request_hash",
    "parsed_cache_key",
    "subject_tag",
]

CACHE_KEY_FILE = "gateway-cache.key"
KEYED_PREFIX = "hmac-sha256:"
_HINT = "Give the cache key as 64 hex digits (32 random bytes): openssl rand -hex 32."


class CacheKey:
    """32 secret bytes; never in a repr, a log line or the database."""

    __slots__ = ("_id", "_secret")

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("a cache key is at least 32 bytes")
        self._secret = secret
        self._id = self.mac("gateway cache key id")[:16]

    def __repr__(self) -> str:
        return "CacheKey(**********)"

    def mac(self, text: str) -> str:
        return hmac.new(self._secret, text.encode("utf-8"), hashlib.sha256).hexdigest()

    @property
    def key_id(self) -> str:
        """A short name for the key (16 hex), recorded beside each subject tag so that a tag
        is looked up under the key that made it; derived under the key, it reveals nothing
        of it."""
        return self._id


def keyed_request_hash(key: CacheKey | None, plain: str) -> str:
    """The replay key recorded for a request whose plain hash is ``plain``."""
    return plain if key is None else KEYED_PREFIX + key.mac(plain)


def subject_tag(key: CacheKey, subject: str) -> str:
    """The keyed digest a data subject's identifier is recorded as (never the identifier):
    the same for every request of that subject under one cache key, so that
    ``gateway audit erase --subject`` finds them, and confirmable by no one without the key."""
    return KEYED_PREFIX + key.mac("subject\x00" + subject)


def cache_key_path(settings: Settings) -> Path | None:
    if settings.cache_key_file is not None:
        return settings.cache_key_file
    if settings.record_key_file is not None:
        return settings.record_key_file.parent / CACHE_KEY_FILE
    database = sqlite_path(settings.database_url)
    return database.parent / CACHE_KEY_FILE if database is not None else None


def cache_key(
    settings: Settings, *, create: bool, keyed_log: Callable[[], bool] | None = None
) -> CacheKey | None:
    """This deployment's cache key (see the module's docstring for where it comes from).

    ``keyed_log`` says whether the log already holds ``hmac-sha256:`` hashes: asked only
    before a new key would be made, which is then refused (:class:`ConfigurationError`). A
    new key there would be a lost key replaced in silence: every keyed hash and subject tag
    already recorded would be found under no key."""
    if settings.cache_key is not None:
        return parsed_cache_key(settings.cache_key.get_secret_value(), "GATEWAY_CACHE_KEY")
    path = cache_key_path(settings)
    if path is None:
        return None
    try:
        return parsed_cache_key(path.read_text(encoding="ascii"), str(path))
    except FileNotFoundError:
        if settings.cache_key_file is not None:
            raise ConfigurationError(
                f"the cache key file {str(path)!r} does not exist.",
                hint="Point GATEWAY_CACHE_KEY_FILE at the deployment's cache key.",
            ) from None
        if not create or not path.parent.is_dir():
            return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not text"
        raise ConfigurationError(
            f"cannot read the cache key file {str(path)!r}: {reason}."
        ) from None
    if keyed_log is not None and keyed_log():
        raise ConfigurationError(
            f"the cache key file {str(path)!r} is missing, and this audit log holds request "
            "hashes and subject tags keyed under a cache key: a new key would find none of "
            "them (replay cache, replay --verify, audit erase --subject).",
            hint="Restore the deployment's cache key to that file (or point "
            "GATEWAY_CACHE_KEY_FILE at it); docs/security.md, the cache key.",
        )
    try:
        return _created(path)
    except OSError as exc:
        if settings.cache_key_file is not None:
            raise ConfigurationError(
                f"cannot create the cache key file {str(path)!r}: {exc.strerror}.",
                hint="Make the folder writable, or give the key (GATEWAY_CACHE_KEY).",
            ) from None
        # The default place, beside a record key that may sit on a read-only secret mount:
        # a deployment that worked before keeps working, with plain hashes, and says so.
        log.warning("cache_key_unavailable", path=str(path), reason=str(exc.strerror))
        return None


def parsed_cache_key(text: str, where: str) -> CacheKey:
    """A cache key given as hex (``where`` names it in the error)."""
    try:
        secret = bytes.fromhex(text.strip())
        return CacheKey(secret)
    except ValueError:
        raise ConfigurationError(f"the cache key in {where} is not usable.", hint=_HINT) from None


def _created(path: Path) -> CacheKey:
    """A new key written whole beside ``path`` and linked into place (mode 0600): of two
    processes starting at once, the second reads the first's."""
    secret = secrets.token_bytes(32)
    try:
        write_new_secret(path, secret.hex())
    except FileExistsError:
        return parsed_cache_key(path.read_text(encoding="ascii"), str(path))
    return CacheKey(secret)
