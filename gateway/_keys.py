"""What identifies a request and the code that handled it, shared by every request path.

    request_hash_for(plan, model_version=None, key)   # the replay-cache and audit key
    new_request_id()                             # "req_<32 hex>"
    GATEWAY_VERSION                              # recorded with every intent

The gateway, live replay and replay --verify all key requests here, so a re-planned request
hashes exactly as the original did.
"""

from __future__ import annotations

import uuid
from importlib.metadata import PackageNotFoundError, version

from audit.canonical import canonical_digest
from gateway.keys import KEYED_PREFIX, CacheKey, keyed_request_hash
from gateway.policy import Plan

try:
    GATEWAY_VERSION = version("compliance-gateway")
except PackageNotFoundError:  # running from a source tree without installation
    GATEWAY_VERSION = "0+unknown"


def request_hash_for(plan: Plan, model_version: str | None, key: CacheKey | None = None) -> str:
    """The cache and audit key: keyed (``hmac-sha256:``) under the deployment's cache key
    when there is one, so the log alone confirms no guessed prompt; else the plain hash.
    A provider whose model ids do not fix the model (a local model's weights can change)
    adds the model version, so that a retrained model never serves an old answer; Claude
    model ids are already fixed models."""
    return keyed_request_hash(key, plain_request_hash(plan, model_version))


def recorded_request_hash(
    plan: Plan, model_version: str | None, key: CacheKey | None, recorded: str
) -> str:
    """What ``plan`` hashes to in the scheme ``recorded`` was written in (its prefix): plain
    for events written before keyed hashes (or without a cache key), keyed otherwise."""
    if recorded.startswith(KEYED_PREFIX):
        return request_hash_for(plan, model_version, key)
    return plain_request_hash(plan, model_version)


def plain_request_hash(plan: Plan, model_version: str | None) -> str:
    """The unkeyed hash: sha256 of the canonical wire request and its key scope."""
    if model_version is None:
        return plan.request_hash
    return canonical_digest(
        {
            "provider": plan.provider,
            "api_version": plan.api_version,
            "body": plan.body,
            **plan.key_scope,
            "model_version": model_version,
        }
    )


def new_request_id() -> str:
    return "req_" + uuid.uuid4().hex
