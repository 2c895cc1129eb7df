"""Offline mode: run a task's policy on the local model instead of Claude.

    gw = Gateway(offline=True)      # or: gateway ask --offline TASK ...
    offline_policy(policy, catalog)  # the policy a task runs offline under

The derived policy keeps every mandated value the local model can honour (max_tokens, sampling,
stop sequences, system prompt, output format, cache mode, caller bounds) and names the local
model. Thinking and effort have no meaning for an n-gram model, so they are left out (and a
caller may no longer choose effort). The
derived policy is a different policy: it has its own fingerprint, and that fingerprint and its
content are what the audit log records, so an offline answer can never pass for a Claude one.
A JSON task still needs structured outputs, which the local model lacks, so it is refused
with the review's explanation rather than run without its schema guarantee.
"""

from __future__ import annotations

from gateway.catalog import Catalog
from gateway.policy import Policy
from gateway.providers.registry import runs_offline

OFFLINE_MODEL = "local:ngram"


def offline_policy(policy: Policy, catalog: Catalog) -> Policy:
    """``policy`` on the local model; a policy whose model already runs offline as it is."""
    entry = catalog.get(policy.model.id)
    if entry is not None and runs_offline(entry.provider):
        return policy
    generation = policy.generation.model_copy(update={"thinking": None, "effort": None})
    caller = policy.caller.model_copy(update={"effort": None})
    # Only the local model: no caller may choose one of the reviewed policy's other models.
    model = policy.model.model_copy(update={"id": OFFLINE_MODEL, "choices": None})
    return policy.derive("offline", model=model, generation=generation, caller=caller)
