"""Sealed content: a payload stored behind a random salt, so its digest confirms nothing once
the row is gone.

    stored = seal(b'{"messages": ...}')     # SEAL_MARK + 16 random bytes + the content
    digest(stored)                          # what the event records (plain sha256 of the row)
    opened(stored) == b'{"messages": ...}'  # what a reader gets back
    salt_of(stored)                         # the salt, for an export that carries the content

A plain ``sha256(content)`` in a signed event outlives the content's erasure: whoever holds
the log can hash a guessed low-entropy prompt and compare (docs/security.md, "What an erased
request still reveals"). A sealed row's key is ``sha256(SEAL_MARK || salt || content)`` with
a fresh salt per payload, and the salt lives only in the row, so erasing the row erases the
only way to test a guess. The key is still the sha256 of the stored bytes, so every check
that a row holds the bytes of its digest (the store, verify, the PostgreSQL content trigger
of 0007) is unchanged, and rows written before sealing (plain content) keep verifying.

The mark starts with a NUL and a 0xff byte, which no JSON text (a wire body) holds; a
pre-sealing attachment row that began with these 20 exact bytes would be read without
them (the one ambiguity, documented in docs/security.md).
"""

from __future__ import annotations

import secrets

__all__ = ["SALT_BYTES", "SEAL_MARK", "is_sealed", "opened", "salt_of", "seal"]

SEAL_MARK = b"\x00\xffgateway-sealed-1\x00"
SALT_BYTES = 16
_HEAD = len(SEAL_MARK) + SALT_BYTES


def seal(content: bytes, salt: bytes | None = None) -> bytes:
    """The row to store for ``content``: the mark, a salt (fresh unless given), the content."""
    if salt is None:
        salt = secrets.token_bytes(SALT_BYTES)
    if len(salt) != SALT_BYTES:
        raise ValueError(f"a seal's salt is {SALT_BYTES} bytes")
    return SEAL_MARK + salt + content


def is_sealed(stored: bytes) -> bool:
    return len(stored) >= _HEAD and stored.startswith(SEAL_MARK)


def opened(stored: bytes) -> bytes:
    """The content of a stored row: sealed rows lose their mark and salt, others are as is."""
    return stored[_HEAD:] if is_sealed(stored) else stored


def salt_of(stored: bytes) -> bytes | None:
    """The salt of a sealed row (None for a plain one)."""
    return stored[len(SEAL_MARK) : _HEAD] if is_sealed(stored) else None
