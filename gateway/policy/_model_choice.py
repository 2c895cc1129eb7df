"""Which model answers a request: the pinned one, or one of the policy's ``[model] choices``.

    model_id, rest = chosen_model(policy, {"model": "claude-opus-4-7", "max_tokens": 900})

A caller picks a choice with the ``model`` override (``gateway serve`` sets it from the
request's real model id when the policy lists it). The override is taken out of the rest:
the model is recorded as the request's model, not as a generation parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gateway.catalog import ModelInfo
from gateway.errors import PolicyError, PolicyViolation
from gateway.policy._schema import Policy

MODEL_KEY = "model"


def chosen_model(
    policy: Policy, overrides: Mapping[str, object] | None
) -> tuple[str, Mapping[str, object] | None]:
    """The model id that answers, and the overrides without ``model``; PolicyViolation
    (key ``model.choices``) for a model the policy does not let answer."""
    if not overrides or MODEL_KEY not in overrides:
        return policy.model.id, overrides
    asked = overrides[MODEL_KEY]
    rest = {key: value for key, value in overrides.items() if key != MODEL_KEY}
    allowed = policy.model.allowed
    if not isinstance(asked, str) or asked not in allowed:
        raise PolicyViolation(
            f"the request asks for model {asked!r}, but task {policy.task!r} is answered only "
            f"by {', '.join(allowed)} (model.id and [model] choices).",
            key="model.choices",
        )
    return asked, rest or None


def transported(
    model: ModelInfo, policy: Policy, region_of: Callable[[str], str | None]
) -> ModelInfo:
    """``model`` as reached over the policy's ``[model] transport`` (its id there and that
    transport's provider; itself when the policy names none). Review refuses a policy whose
    transport does not offer the model; this guards a catalog edited since. The region the
    policy mandates must be the one the transport is configured to send to (``region_of``:
    the registry's), else nothing is sent."""
    try:
        reached = model.on_transport(policy.model.transport, policy.model.transport_id)
    except KeyError:
        raise PolicyError(
            f"model {model.id!r} is not offered under the id the policy names on the "
            f"{policy.model.transport} transport (model catalog).",
            hint="Review the policy again against the current catalog (gateway policy check).",
        ) from None
    mandated = policy.model.region
    if mandated is not None and reached is not model:
        configured = region_of(reached.provider)
        if configured != mandated:
            raise PolicyError(
                f"task {policy.task!r} must run in region {mandated!r} on the "
                f"{reached.provider} transport, but the gateway is configured to send there "
                f"in {configured!r}; nothing was sent.",
                hint=f"Set the {reached.provider} region setting to {mandated!r} for the "
                "gateway that serves this task.",
            )
    return reached
