"""Record signatures: who wrote an event, proven by a key the database does not hold.

    signer = Signer.from_text(secret)                   # 32-byte Ed25519 seed, hex or base64
    signature = signer.sign(appended.hash)              # what the append path stores
    trusted = TrustedKeys.of([signer.public_key, *auditors_keys])
    check = signature_check(trusted)                    # the read path's SignatureCheck
    check(event)                                        # None when the signature checks out

The hash chain proves order and integrity, not authorship: whoever can INSERT into the
database can append a perfectly linked event. So the writing gateway signs each event with its
record key (Ed25519) and verify and the read path trust only configured public keys.

Where the signature lives: it cannot be inside the hashed body, which it signs. It signs the
event's ``hash``, which covers ``prev_hash`` and the body (and through the body the seq, time,
kind, request id and hash, data and payload digests), and is stored beside the body in the
``signature`` column, with ``key_id`` (:func:`key_id`, a short fingerprint of the public key)
saying which key made it. The signed message is :data:`DOMAIN` followed by the hash, so a
record signature can never be taken for any other message the same key might sign.

The private key never goes to the database or a log; a :class:`Signer`'s repr names only its
key id. Public keys are 32 bytes, written as 64 hex characters (base64 is accepted too).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple

from audit.store.models import StoredEvent

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

DOMAIN = b"compliance-gateway audit event v1\n"
# A format-2 event (audit.store.sequenced) is signed before it is linked: the message is this
# domain, the log's store id and its own hash, sha256(body). Its own domain, so neither kind
# of signature can be taken for the other; the store id, so a row signed for one log is not
# a valid row of another log that trusts the same key (a format-1 signature is bound to its
# log by prev_hash). Such an event is told by its empty prev_hash.
SEQUENCED_DOMAIN = b"compliance-gateway audit event v2 (sequenced)\n"
SEQUENCED_PREV = ""
KEY_HINT = (
    "A record key is 32 random bytes as 64 hex characters (or base64); make one with "
    "`gateway keys new record --out FILE` and keep it out of the database."
)

# Given an event, None when its signature checks out under a trusted key, else why not.
SignatureCheck = Callable[[StoredEvent], str | None]


class UnusableKey(ValueError):
    """A key's text is not a usable Ed25519 key. The message never quotes the text."""


def _key_bytes(text: str, what: str) -> bytes:
    value = text.strip()
    raw: bytes | None = None
    if len(value) == 64:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = None
    if raw is None:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != 32:
        raise UnusableKey(f"the {what} is not 32 bytes as 64 hex characters or base64.")
    return raw


def key_id(public_raw: bytes) -> str:
    """The short fingerprint a row names its signer by: ``ed25519:`` and 16 hex characters
    of the SHA-256 of the raw public key. Only an index: the signature is always checked
    with the trusted key itself, so a key id that collides proves nothing."""
    return "ed25519:" + hashlib.sha256(public_raw).hexdigest()[:16]


def signed_message(
    event_hash: str, *, sequenced: bool = False, store_id: str | None = None
) -> bytes:
    """What a record signature signs; a format-2 (``sequenced``) one names its log's
    ``store_id`` (:class:`ValueError` without one: fails closed where it is checked)."""
    if not sequenced:
        return DOMAIN + event_hash.encode("ascii")
    if not store_id:
        raise ValueError("a format-2 record signature names its log's store id")
    return SEQUENCED_DOMAIN + f"store {store_id}\n{event_hash}".encode("ascii")


def _ed25519() -> ModuleType:
    # `cryptography` loads at the first key use, not with this module: a reading command
    # holds a record key it never uses, and the import is a tenth of `gateway audit list`'s
    # start (bench/cli_start_bench.py). Every Ed25519 seed of 32 bytes is a valid key, so
    # nothing is accepted here that the import would have refused.
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return ed25519


class Signer:
    """The writing gateway's record key. Signs event hashes; holds the only private copy.

    Built from the 32-byte seed; the key itself (and its public half) on first use."""

    __slots__ = ("_key", "_names", "_seed")

    def __init__(self, seed: bytes) -> None:
        if len(seed) != 32:
            raise UnusableKey("the record key is not 32 bytes.")
        self._seed = seed
        self._key: Ed25519PrivateKey | None = None
        self._names: tuple[str, str] | None = None  # (public key hex, key id), made once

    @classmethod
    def generate(cls) -> Signer:
        return cls(_ed25519().Ed25519PrivateKey.generate().private_bytes_raw())

    @classmethod
    def from_text(cls, text: str) -> Signer:
        return cls(_key_bytes(text, "record key"))

    @property
    def public_key(self) -> str:
        """The public key as 64 hex characters."""
        return self._named()[0]

    @property
    def key_id(self) -> str:
        return self._named()[1]

    def _private(self) -> Ed25519PrivateKey:
        if self._key is None:
            self._key = _ed25519().Ed25519PrivateKey.from_private_bytes(self._seed)
        return self._key

    def _named(self) -> tuple[str, str]:
        if self._names is None:
            raw = self._private().public_key().public_bytes_raw()
            self._names = (raw.hex(), key_id(raw))
        return self._names

    @classmethod
    def from_file(cls, path: Path) -> Signer:
        """Read a key file (:func:`create_key_file`'s format: hex and a newline)."""
        return cls.from_text(path.read_text(encoding="ascii"))

    def sign(self, event_hash: str, *, sequenced: bool = False, store_id: str | None = None) -> str:
        """The base64 Ed25519 signature of an event's hash (88 characters); ``sequenced``:
        of a format-2 event's hash (its body's) in the log ``store_id``."""
        message = signed_message(event_hash, sequenced=sequenced, store_id=store_id)
        return base64.b64encode(self._private().sign(message)).decode("ascii")

    def seed_hex(self) -> str:
        """The private seed, for writing the key file only."""
        return self._seed.hex()

    def __repr__(self) -> str:
        return f"Signer({self.key_id})"


def create_key_file(path: Path) -> Signer:
    """Make a new record key and write it to ``path`` (mode 0600), which must not exist yet.

    Written whole to a temporary file beside it, then linked into place: when two processes
    start at once, one links its key and the other gets ``FileExistsError`` and reads that
    one, never a half-written file.
    """
    signer = Signer.generate()
    write_new_secret(path, signer.seed_hex())
    return signer


def write_new_secret(path: Path, text: str) -> None:
    """Write ``text`` and a newline to ``path`` (mode 0600), which must not exist yet: whole,
    to a temporary file beside it, then linked into place, so a reader never sees half of
    it; ``FileExistsError`` when another process linked its own first."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        try:
            os.write(fd, (text + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)
    finally:
        os.unlink(tmp)


class TrustedKey(NamedTuple):
    key_id: str
    public_key: str  # 64 hex characters


class TrustedKeys:
    """The public keys a check trusts, by key id. Built only from keys given explicitly."""

    def __init__(self, keys: Mapping[str, tuple[str, Ed25519PublicKey]] | None = None) -> None:
        self._keys = dict(keys or {})

    @classmethod
    def of(cls, texts: Iterable[str]) -> TrustedKeys:
        """Public keys as text (hex or base64); :class:`UnusableKey` names the bad one by its
        position, never by its text."""
        keys: dict[str, tuple[str, Ed25519PublicKey]] = {}
        for n, text in enumerate(texts, 1):
            raw = _key_bytes(text, f"trusted public key #{n}")
            keys[key_id(raw)] = (raw.hex(), _ed25519().Ed25519PublicKey.from_public_bytes(raw))
        return cls(keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[TrustedKey]:
        for kid, (hex_key, _) in sorted(self._keys.items()):
            yield TrustedKey(kid, hex_key)

    def __contains__(self, public_key: object) -> bool:
        """Whether a public key (hex) is one of these."""
        return any(hex_key == public_key for hex_key, _ in self._keys.values())

    def knows(self, kid: object) -> bool:
        return isinstance(kid, str) and kid in self._keys

    def check(
        self,
        kid: object,
        signature: object,
        event_hash: str,
        *,
        sequenced: bool = False,
        store_id: str | None = None,
    ) -> str | None:
        """None when ``signature`` is a trusted key's signature of ``event_hash`` (of a
        format-2 event's with ``sequenced``), else why not. A NULL signature is the caller's
        to judge (a legacy row may be allowed)."""
        if not isinstance(signature, str):
            return "it is not signed"
        entry = self._keys.get(kid) if isinstance(kid, str) else None
        if entry is None:
            return f"it is signed by key {str(kid)[:40]!r}, which is not a trusted key"
        from cryptography.exceptions import InvalidSignature  # loaded with the key (_ed25519)

        try:
            message = signed_message(event_hash, sequenced=sequenced, store_id=store_id)
            entry[1].verify(base64.b64decode(signature, validate=True), message)
        except (InvalidSignature, binascii.Error, ValueError):
            return f"its signature does not check out under key {kid}"
        return None


def signature_check(trusted: TrustedKeys, store_id: str | None = None) -> SignatureCheck:
    """The read path's check: an event's signature under one of ``trusted``, or why not;
    ``store_id``: the log's, which a format-2 event's signature names."""

    def check(event: StoredEvent) -> str | None:
        sequenced = event.prev_hash == SEQUENCED_PREV
        return trusted.check(
            event.key_id, event.signature, event.hash, sequenced=sequenced, store_id=store_id
        )

    return check


class Trust(NamedTuple):
    """What verify checks record signatures against: ``keys``, and the seq before which an
    event may be unsigned (a log that predates signing; 1, the default, allows none).

    ``integrator``: the format-2 integrator's public keys (GATEWAY_INTEGRATOR_PUBLIC_KEYS),
    accepted for its checkpoints and for void events only. A record key never signs an
    integrator checkpoint, and an integrator key never signs any other event: the integrator
    runs apart from the gateways, and its key must not be able to write an answer."""

    keys: TrustedKeys
    allow_unsigned_before: int = 1
    integrator: TrustedKeys | None = None
