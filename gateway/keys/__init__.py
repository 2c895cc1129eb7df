"""Keys: the record key that signs the log, the keys a reader trusts, the caller-id salt.

    signer = record_signer(settings, create=True)      # this gateway's record key (or None)
    trusted = trusted_record_keys(settings, signer)    # its own key, plus configured ones
    ring = cache_key_ring(settings)                    # the cache key and earlier ones
    user_id = forwarded_user_id("payments-svc", salt=settings.user_id_salt)

    made = new_key_file(KeyKind.RECORD, Path("record.key"))   # 0600, and record.key.pub
    keys = public_keys(settings)                       # every public half, for an auditor

Callers' own keys for `gateway serve` are issued on the record: ``gateway.callers``.
"""

from gateway.keys._cache_key import (
    CACHE_KEY_FILE,
    KEYED_PREFIX,
    CacheKey,
    cache_key,
    keyed_request_hash,
    subject_tag,
)
from gateway.keys._cache_key_ring import CacheKeyRing, cache_key_ring
from gateway.keys._new_keys import KEY_USES, KeyKind, NewKey, new_key_file, new_key_hint
from gateway.keys._public_keys import PUBLIC_KEYS_FORMAT, PublicKeys, public_keys, public_keys_text
from gateway.keys._record_keys import (
    RECORD_KEY_FILE,
    integrator_keys,
    public_keys_given,
    read_public_keys,
    record_key_path,
    record_signer,
    trusted_record_keys,
)
from gateway.keys._user_id import USER_ID_PREFIX, forwarded_user_id

__all__ = [
    "CACHE_KEY_FILE",
    "KEYED_PREFIX",
    "KEY_USES",
    "PUBLIC_KEYS_FORMAT",
    "RECORD_KEY_FILE",
    "USER_ID_PREFIX",
    "CacheKey",
    "CacheKeyRing",
    "KeyKind",
    "NewKey",
    "PublicKeys",
    "cache_key",
    "cache_key_ring",
    "forwarded_user_id",
    "integrator_keys",
    "keyed_request_hash",
    "new_key_file",
    "new_key_hint",
    "public_keys",
    "public_keys_given",
    "public_keys_text",
    "read_public_keys",
    "record_key_path",
    "record_signer",
    "subject_tag",
    "trusted_record_keys",
]
