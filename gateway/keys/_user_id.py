"""The caller identifier a policy may forward as ``metadata.user_id`` (abuse monitoring).

    user_id = forwarded_user_id("payments-svc", salt=settings.user_id_salt)
    # "gw-u1-" + 32 hex digits: the same for every request of the caller, under one salt

The provider uses ``metadata.user_id`` to tell one end user's traffic from another's; it must
never carry personal data. The gateway sends HMAC-SHA256 of the caller's name under a
per-deployment secret (``GATEWAY_USER_ID_SALT``), cut to 128 bits: stable for a caller, so
the provider can act on one abusive caller, and not reversible without the secret, so the
name (a service, a desk, a person) is not disclosed. A plain hash would be: caller names are
few and guessable. The prefix names the scheme, so a change of scheme is a new identifier.
"""

from __future__ import annotations

import hashlib
import hmac

from pydantic import SecretStr

__all__ = ["USER_ID_PREFIX", "forwarded_user_id"]

USER_ID_PREFIX = "gw-u1-"


def forwarded_user_id(caller: str | None, *, salt: SecretStr | None) -> str | None:
    """The identifier for ``caller``, or ``None`` without a caller or a salt."""
    if caller is None or salt is None or not salt.get_secret_value():
        return None
    mac = hmac.new(salt.get_secret_value().encode(), caller.encode(), hashlib.sha256)
    return USER_ID_PREFIX + mac.hexdigest()[:32]
