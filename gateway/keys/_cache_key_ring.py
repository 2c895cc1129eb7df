"""The cache key ring: the current cache key and the earlier ones, kept to find old tags.

    ring = cache_key_ring(settings)            # None: no cache key here
    ring.subject_tags("customer-118204")       # {key id: tag} under every key in the ring
    ring.key_ids                               # the ids of the keys the ring holds

A data subject's tag is keyed under the cache key of the gateway that recorded the request,
and the key's id is recorded beside it (``data.subject_key``). Once the cache key is
replaced, requests recorded before carry tags only the old key makes, so
`gateway audit erase --subject` and `audit hold --subject` look under every key in the ring:
the current key and those listed in ``previous_cache_keys_file`` (one key a line, 64 hex,
``#`` comments; mode 0600, held like the cache key). The record key's ring is its public
halves (``trusted_keys``); the cache key has no public half, so the old secrets are kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gateway.errors import ConfigurationError
from gateway.keys._cache_key import CacheKey, cache_key, parsed_cache_key, subject_tag
from gateway.settings import Settings

__all__ = ["CacheKeyRing", "cache_key_ring"]


class CacheKeyRing:
    """The current cache key first, then the earlier ones (each once)."""

    __slots__ = ("current", "keys")

    def __init__(self, current: CacheKey, previous: Iterable[CacheKey] = ()) -> None:
        self.current = current
        seen: dict[str, CacheKey] = {current.key_id: current}
        for key in previous:
            seen.setdefault(key.key_id, key)
        self.keys = tuple(seen.values())

    def __repr__(self) -> str:
        return f"CacheKeyRing({', '.join(self.key_ids)})"

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(k.key_id for k in self.keys)

    def subject_tags(self, subject: str) -> dict[str, str]:
        """The tag ``subject`` is recorded as under each key of the ring, by key id."""
        return {k.key_id: subject_tag(k, subject) for k in self.keys}


def cache_key_ring(settings: Settings) -> CacheKeyRing | None:
    """The ring of this deployment's cache keys, or None without a current key (nothing is
    created here: a reader of tags makes no key)."""
    current = cache_key(settings, create=False)
    if current is None:
        return None
    path = settings.previous_cache_keys_file
    return CacheKeyRing(current, read_previous_cache_keys(path) if path is not None else ())


def read_previous_cache_keys(path: Path) -> list[CacheKey]:
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise ConfigurationError(
            f"the previous cache keys file {str(path)!r} does not exist.",
            hint="Point GATEWAY_PREVIOUS_CACHE_KEYS_FILE at the file of earlier cache keys.",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not text"
        raise ConfigurationError(
            f"cannot read the previous cache keys file {str(path)!r}: {reason}."
        ) from None
    keys = []
    for number, line in enumerate(text.splitlines(), start=1):
        value = line.split("#", 1)[0].strip()
        if value:
            keys.append(parsed_cache_key(value, f"{path} line {number}"))
    return keys
