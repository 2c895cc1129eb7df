"""Rules about the transport a task's model is reached over ([model] transport, transport_id,
region): the model is offered there, under a name the catalog knows, in a named region, and
every mandate of the policy can be honoured on that transport."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._findings import Finding, error
from gateway.policy.rules._subject import Rule, Subject
from gateway.providers.registry import capabilities


def _other_transport(s: Subject) -> str | None:
    """The cloud transport the policy names: not the model's own provider, or one the
    catalog lists the model on (the model as reached over it, when planning)."""
    transport = s.policy.model.transport
    if s.model is None or transport is None:
        return None
    if transport != s.model.provider or transport in s.model.transports:
        return transport
    return None


def transport_unavailable(s: Subject) -> Iterator[Finding]:
    transport = _other_transport(s)
    if transport is None or s.model is None or transport in s.model.transports:
        return
    offered = ", ".join(sorted(s.model.transports)) or "none besides its own"
    yield error(
        "transport-unavailable",
        s.file,
        "model.transport",
        f"The catalog knows no id for {s.model_id!r} on the {transport} transport (it lists: "
        f"{offered}), so the gateway cannot say which model would answer there.",
        "Pin a model the catalog lists for that transport, or have a catalog override "
        "reviewed that adds its id there.",
    )


def transport_id_unknown(s: Subject) -> Iterator[Finding]:
    transport, chosen = _other_transport(s), s.policy.model.transport_id
    if transport is None or chosen is None or s.model is None:
        return
    ids = s.model.transports.get(transport, ())
    if ids and chosen not in ids:
        yield error(
            "transport-id-unknown",
            s.file,
            "model.transport_id",
            f"{chosen!r} is not one of the catalog's ids for {s.model_id!r} on the "
            f"{transport} transport ({', '.join(ids)}).",
            "Name one of those ids (a cross-region inference profile where the account "
            "needs one), or leave transport_id out for the base id.",
        )


def transport_fields_unused(s: Subject) -> Iterator[Finding]:
    if s.model is None or _other_transport(s) is not None:
        return
    for key in ("transport_id", "region"):
        if getattr(s.policy.model, key) is not None:
            yield error(
                "transport-field-unused",
                s.file,
                f"model.{key}",
                f"model.{key} applies to a cloud transport only; {s.model_id!r} is reached over "
                "its own provider here, so the mandate would not be honoured.",
                'Name the transport ([model] transport = "bedrock" or "vertex"), or remove '
                f"{key} (Anthropic's API takes inference_geo for where inference runs).",
            )


def transport_region_missing(s: Subject) -> Iterator[Finding]:
    transport = _other_transport(s)
    if transport is not None and s.policy.model.region is None:
        yield error(
            "transport-region-missing",
            s.file,
            "model.region",
            f"On the {transport} transport the region decides where the bank's data is "
            "processed, and the policy does not name one.",
            "Set [model] region to the cloud region the requests must go to (the gateway's "
            "transport settings must reach that region).",
        )


def transport_inference_geo(s: Subject) -> Iterator[Finding]:
    transport = _other_transport(s)
    geo = s.policy.model.inference_geo
    if transport is None or geo is None or capabilities(transport).inference_geo:
        return
    yield error(
        "transport-inference-geo",
        s.file,
        "model.inference_geo",
        f"The {transport} transport does not take inference_geo, so the mandated "
        f"inference_geo = {geo!r} would be neither sent nor checked.",
        "Remove inference_geo and mandate the location with [model] region (and, on "
        "Bedrock, a regional inference profile as transport_id).",
    )


RULES: tuple[Rule, ...] = (
    transport_unavailable,
    transport_id_unknown,
    transport_fields_unused,
    transport_region_missing,
    transport_inference_geo,
)
