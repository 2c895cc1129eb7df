"""Who is calling: a gateway-issued caller key, as ``x-api-key`` or ``Authorization: Bearer``.

    auth = Authenticator(ring, refresh_s=10.0)
    key = await auth.caller_of(request.headers)     # a CallerKey, or ApiError 401

Both SDK generations are accepted: the older send ``x-api-key``, the newer ``Authorization:
Bearer``. The caller name recorded for the request is the key's, never one the client names.
The key ring is read at start, every ``refresh_s`` seconds, and again when an unknown key is
presented - at most once a second, so a stream of bad keys cannot turn into a stream of
database reads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from gateway._log import log
from gateway.callers import CallerKey, KeyRing
from gateway.server._errors import ApiError

__all__ = ["Authenticator", "presented_key"]

UNKNOWN_KEY_REFRESH_S = 1.0
_MAX_KEY_LENGTH = 512


def presented_key(headers: Mapping[str, str]) -> str | None:
    key = headers.get("x-api-key")
    if not key:
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        key = token.strip() if scheme.lower() == "bearer" else None
    return key or None


class Authenticator:
    def __init__(self, ring: KeyRing, *, refresh_s: float) -> None:
        self._ring = ring
        self._refresh_s = refresh_s
        self._lock = asyncio.Lock()
        self._last_refresh = time.monotonic()

    async def refresh(self, *, older_than: float = 0.0) -> None:
        """Re-read the ring, unless a read finished less than ``older_than`` seconds ago
        (concurrent callers wait for the one read in progress)."""
        async with self._lock:
            if time.monotonic() - self._last_refresh >= older_than:
                await asyncio.to_thread(self._ring.refresh)
                self._last_refresh = time.monotonic()

    async def caller_of(self, headers: Mapping[str, str]) -> CallerKey:
        key = presented_key(headers)
        if key is None:
            raise ApiError(
                401,
                "authentication_error",
                "no caller key: send a gateway caller key as x-api-key or "
                "'Authorization: Bearer <key>' (issued by `gateway keys create`).",
            )
        if len(key) > _MAX_KEY_LENGTH:
            raise _refused()
        found = self._ring.authenticate(key)
        if found is None:
            await self.refresh(older_than=UNKNOWN_KEY_REFRESH_S)
            found = self._ring.authenticate(key)
        if found is None:
            log.warning("caller_key_refused")
            raise _refused()
        return found

    async def keep_fresh(self) -> None:
        """Re-read the ring every ``refresh_s`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                await self.refresh()
            except Exception as exc:  # noqa: BLE001 - the ring in memory stays; say why
                log.error("caller_keys_refresh_failed", error=type(exc).__name__)


def _refused() -> ApiError:
    return ApiError(
        401,
        "authentication_error",
        "the caller key is not valid: it is unknown or revoked.",
    )
