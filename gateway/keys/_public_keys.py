"""The public keys an outside party needs to check this gateway's evidence, in one file.

    keys = public_keys(settings)            # record, checkpoint and integrator keys (hex)
    Path("public-keys.json").write_text(public_keys_text(keys))

The record keys are the ones a verify trusts (this gateway's own and GATEWAY_TRUSTED_KEYS);
the checkpoint key is the public half of GATEWAY_CHECKPOINT_KEY; the integrator keys are
GATEWAY_INTEGRATOR_PUBLIC_KEYS. Each kind is listed apart because each is trusted for
different things (docs/evidence-format.md): a reader must never take a checkpoint key as a
record key. The file is what `verifier/verify_evidence.py --keys` reads.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from audit.errors import CheckpointError
from audit.proofs.checkpoint_key import parse_key
from audit.proofs.checkpoint_key import public_key as checkpoint_public_key
from gateway.errors import ConfigurationError
from gateway.keys._record_keys import integrator_keys, record_signer, trusted_record_keys
from gateway.settings import Settings

__all__ = ["PUBLIC_KEYS_FORMAT", "PublicKeys", "public_keys", "public_keys_text"]

PUBLIC_KEYS_FORMAT = "compliance-gateway public keys v1"


class PublicKeys(NamedTuple):
    record: tuple[str, ...]
    checkpoint: tuple[str, ...]
    integrator: tuple[str, ...]

    def of(self, kind: str) -> tuple[str, ...]:
        found: tuple[str, ...] = getattr(self, kind)
        return found


def public_keys(settings: Settings) -> PublicKeys:
    """The public halves of every key this gateway signs or trusts evidence with; never a
    private key."""
    record = trusted_record_keys(settings, record_signer(settings, create=False))
    checkpoint: tuple[str, ...] = ()
    if settings.checkpoint_key is not None:
        try:
            seed = parse_key(settings.checkpoint_key.get_secret_value())
        except CheckpointError as exc:
            raise ConfigurationError(exc.message, hint=exc.hint) from None
        checkpoint = (checkpoint_public_key(seed),)
    integrators = integrator_keys(settings)
    return PublicKeys(
        record=tuple(k.public_key for k in record),
        checkpoint=checkpoint,
        integrator=tuple(k.public_key for k in integrators or ()),
    )


def public_keys_text(keys: PublicKeys, kind: str | None = None) -> str:
    """The keys file: JSON with each kind apart, or (``kind``) that kind's keys one a line,
    the form ``--public-key FILE`` reads."""
    if kind is not None:
        return "".join(f"{key}\n" for key in keys.of(kind))
    return json.dumps({"format": PUBLIC_KEYS_FORMAT, **keys._asdict()}, indent=2) + "\n"
