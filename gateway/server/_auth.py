"""Who is calling: a gateway-issued caller key, as ``x-api-key`` or ``Authorization: Bearer``.

    auth = Authenticator(ring, refresh_s=10.0)
    key = await auth.caller_of(request.headers)     # a CallerKey, or ApiError 401

Both SDK generations are accepted: the older send ``x-api-key``, the newer ``Authorization:
Bearer``. The caller name recorded for the request is the key's, never one the client names.
The key ring is read at start, every ``refresh_s`` seconds, and again when an unknown key is
presented - at most once a second (an unknown key waits for the next read), so a stream of
bad keys cannot turn into a stream of database reads, and a key issued a moment ago works.
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

    async def refresh(self, *, asked_at: float | None = None) -> None:
        """Re-read the ring. With ``asked_at`` (an unknown key's arrival): not if a read began
        since, and not sooner than UNKNOWN_KEY_REFRESH_S after the last read began - the
        caller waits instead, so a key issued a moment ago still works on its first use."""
        async with self._lock:
            if asked_at is not None:
                if self._last_refresh >= asked_at:
                    return
                wait = self._last_refresh + UNKNOWN_KEY_REFRESH_S - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            self._last_refresh = time.monotonic()
            await asyncio.to_thread(self._ring.refresh)

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
            await self.refresh(asked_at=time.monotonic())
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
