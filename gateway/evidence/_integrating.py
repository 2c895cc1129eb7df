"""`gateway audit integrate`'s library side: open a format-2 log and run its integrator.

    step = integrate(settings, key_text, once=True, grace_s=30)  # -> audit.sequenced.Step

Opens the audit database of ``settings`` (``audit_format = 2`` begins format 2 on a
PostgreSQL log that has not yet), then runs :class:`audit.sequenced.integrator.Integrator` with the
integrator's key: until nothing is left to link (``once``) or until ``stop`` is set. The
key signs the integrator's checkpoints and the voids of seqs whose writer died; verify and
the read path accept its public key from GATEWAY_INTEGRATOR_PUBLIC_KEYS for those only (never
in GATEWAY_TRUSTED_KEYS: a record key signs answers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import closing

from audit.sequenced.integrator import DEFAULT_CHECKPOINT_EVERY_S, DEFAULT_GRACE_S, Integrator, Step
from gateway._inputs import key_seed
from gateway._store_adapter import StoreAdapter, audit_call
from gateway.settings import Settings

__all__ = ["Step", "integrate", "integrator_seed"]

KEY_HINT = (
    "Make one with `gateway keys new integrator --out FILE`, keep it apart "
    "from the record keys, and pass it as --key or GATEWAY_INTEGRATOR_KEY."
)


def integrator_seed(text: str) -> bytes:
    """The integrator's Ed25519 seed: 64 hex characters, or a file holding them."""
    return key_seed(text, "the integrator key", hint=KEY_HINT)


def integrate(
    settings: Settings,
    key_text: str,
    *,
    once: bool,
    interval_s: float = 1.0,
    grace_s: float = DEFAULT_GRACE_S,
    checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S,
    stop: threading.Event | None = None,
    on_ready: Callable[[Integrator], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> Step:
    seed = integrator_seed(key_text)
    with closing(StoreAdapter.open(settings, log_format=settings.audit_format)) as log:
        integrator = log.run(
            Integrator, seed, grace_s=grace_s, checkpoint_every_s=checkpoint_every_s
        )
        if on_ready is not None:
            on_ready(integrator)
        return audit_call(
            integrator.run, interval_s, stop or threading.Event(), once=once, on_warning=on_warning
        )
