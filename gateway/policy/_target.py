"""A model target named on the command line, optionally on a transport and in a region:
``[TRANSPORT:]ID[@REGION]`` (``gateway replay --model``).

    target = parse_model_target("bedrock:eu.anthropic.claude-sonnet-4-6@eu-central-1", catalog)
    target.model.id          # "claude-sonnet-4-6": the catalog's model
    target.reached.provider  # "bedrock"; target.reached.id "eu.anthropic.claude-sonnet-4-6"
    target.policy(recorded)  # the recorded policy pinned to it, transport and region included

``ID`` is the catalog's id of the model or, after a cloud ``TRANSPORT``, one of its ids there
(a Bedrock base id or cross-region inference profile); a cloud transport needs ``@REGION``
(where the bank's data goes is a mandate, never a default). Without ``TRANSPORT`` the model
goes over its own provider, as a policy without ``[model] transport`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.catalog import Catalog, ModelInfo
from gateway.errors import InputError
from gateway.policy._schema import Policy
from gateway.providers.registry import PROVIDER_NAMES

__all__ = ["TARGET_SYNTAX", "ModelTarget", "parse_model_target"]

TARGET_SYNTAX = "[TRANSPORT:]ID[@REGION], e.g. bedrock:eu.anthropic.claude-sonnet-4-6@eu-central-1"


@dataclass(frozen=True)
class ModelTarget:
    """A catalog model, the transport it is reached over (None: its own provider), the id
    named there (None: the transport's base id) and the region (cloud transports only)."""

    model: ModelInfo
    transport: str | None = None
    transport_id: str | None = None
    region: str | None = None

    @property
    def reached(self) -> ModelInfo:
        """The model as the transport serves it: its id, provider and API version there."""
        return self.model.on_transport(self.transport, self.transport_id)

    @property
    def label(self) -> str:
        """How reports name it: the model id, or ``TRANSPORT:ID@REGION`` on a cloud."""
        if self.transport is None:
            return self.model.id
        return f"{self.transport}:{self.reached.id}@{self.region}"

    def policy(self, policy: Policy) -> Policy:
        """``policy`` pinned to this target (transport, id there and region replaced)."""
        moved = policy.on_model(self.model.id)
        table = moved.model.model_copy(
            update={
                "transport": self.transport,
                "transport_id": self.transport_id,
                "region": self.region,
            }
        )
        return moved.model_copy(update={"model": table})


def parse_model_target(text: str, catalog: Catalog) -> ModelTarget:
    """The target ``text`` names (see the module); InputError, in one line, when it names none.

    A catalog id is taken whole first (``local:ngram-draft`` is an id, not a transport), and
    the region is what follows the last ``@`` (a Vertex id may hold one itself)."""
    whole = catalog.get(text)
    if whole is not None:
        return ModelTarget(whole)
    transport, sep, after = text.partition(":")
    if not sep:
        named, _, region = text.rpartition("@")
        if not named or catalog.get(named) is None:
            raise _unknown(text) if "@" not in text else _bad(text, _unknown(named).message)
        raise _bad(text, "a region applies to a cloud transport only (bedrock:, vertex:)")
    if not transport:
        raise _bad(text, "it is not of the form " + TARGET_SYNTAX)
    if transport not in PROVIDER_NAMES:
        known = ", ".join(sorted(PROVIDER_NAMES))
        raise _bad(text, f"no transport is called {transport!r} ({known})")
    named, at, region = after.rpartition("@")
    if not at:
        named, region = after, ""
    if not named or (at and not region):
        raise _bad(text, "it is not of the form " + TARGET_SYNTAX)
    model = catalog.get(named)
    if model is not None and transport == model.provider:
        if region:
            raise _bad(text, f"a region applies to a cloud transport only, not {transport}")
        return ModelTarget(model)
    chosen = None
    if model is None:
        model = _offering(catalog, transport, named)
        chosen = named
    if model is None or transport not in model.transports:
        if _offering(catalog, transport, after) is not None:  # an id with an @, no region
            raise _bad(text, f"name the region the {transport} requests must go to (@REGION)")
        raise _bad(text, f"the catalog lists no model with id {named!r} on {transport}")
    if not region:
        raise _bad(text, f"name the region the {transport} requests must go to (@REGION)")
    return ModelTarget(model, transport, chosen, region)


def _offering(catalog: Catalog, transport: str, transport_id: str) -> ModelInfo | None:
    for model_id in catalog.ids():
        model = catalog.get(model_id)
        if model is not None and transport_id in model.transports.get(transport, ()):
            return model
    return None


def _unknown(model_id: str) -> InputError:
    return InputError(
        f"model {model_id!r} is not in the model catalog.",
        hint="List the known models with 'gateway models list'; a model on a cloud "
        f"transport is named {TARGET_SYNTAX}.",
    )


def _bad(text: str, why: str) -> InputError:
    return InputError(
        f"--model {text!r}: {why}.",
        hint=f"Name a model as {TARGET_SYNTAX} (gateway models list shows the ids).",
    )
