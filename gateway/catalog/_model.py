"""One model's capabilities, as the policy engine and the planner need them.

info = ModelInfo(id="local:ngram", provider="local", pinned=True, api_version="local-1",
                 sampling="all", top_k=True, max_output_tokens=4096, context_window=8192,
                 lifecycle="active")
info.honours_sampling  # True
"""

from __future__ import annotations

import re
from datetime import date
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.providers.registry import PROVIDER_NAMES, capabilities

TransportIds = dict[str, tuple[str, ...]]  # transport name -> the model's ids there
Sampling = Literal["none", "temperature-or-top-p", "all"]

# Facts every entry must source (ModelInfo.sources keys); `alias_of` only matters for aliases.
SOURCED_FACTS = (
    "provider",
    "pinned",
    "api_version",
    "sampling",
    "top_k",
    "thinking_types",
    "effort_levels",
    "structured_outputs",
    "max_output_tokens",
    "context_window",
    "lifecycle",
    "retires_at",
    "non_streaming_max_tokens",
    "strict_tools",
    "forced_tool_choice",
    "transports",
)

# Prices, in US dollars per million tokens of each kind the API's usage reports. Optional: a
# price is set only where a source gives it, and then its source (ModelInfo.sources, same
# key) must name the date it was read, since prices change; an unset price is "unpriced".
PRICE_FACTS = ("price_input", "price_output", "price_cache_write", "price_cache_read")
_DATED = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


class ModelInfo(BaseModel):
    """What one model id honours. Frozen; unknown keys in the catalog file are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    provider: str  # a name in the provider registry
    pinned: bool
    alias_of: str | None = None
    api_version: str
    sampling: Sampling
    top_k: bool
    thinking_types: tuple[str, ...] = ()
    # Thinking types the model still accepts but the vendor has deprecated (review warns).
    deprecated_thinking_types: tuple[str, ...] = ()
    effort_levels: tuple[str, ...] = ()
    structured_outputs: bool = False
    # Tools: whether a tool may be declared strict (its input guaranteed to match its schema),
    # and whether tool_choice may force a tool ("any" or a named one).
    strict_tools: bool = False
    forced_tool_choice: bool = True
    max_output_tokens: int = Field(gt=0)
    context_window: int = Field(gt=0)
    lifecycle: Literal["active", "deprecated", "retired"]
    retires_at: date | None = None
    # Range facts the review checks sampling against. The Messages API takes temperature in
    # [0, 1] and top_p in [0, 1]; a sampler that needs a non-empty nucleus refuses top_p 0.
    max_temperature: float = 1.0
    top_p_zero: bool = True
    # Whether the provider ends non-streamed answers that run past its time limit (so review
    # warns about a large max_tokens without streaming).
    non_streaming_time_limit: bool = True
    # The largest max_tokens the provider's SDK lets a call ask for without streaming (None:
    # not known to be limited). Review: a task above it must stream (max-tokens-streaming).
    non_streaming_max_tokens: int | None = Field(default=None, gt=0)
    # USD per million tokens (PRICE_FACTS): input, output, cache writes (prompt caching's
    # cache_creation_input_tokens) and cache reads (cache_read_input_tokens).
    price_input: float | None = Field(default=None, ge=0)
    price_output: float | None = Field(default=None, ge=0)
    price_cache_write: float | None = Field(default=None, ge=0)
    price_cache_read: float | None = Field(default=None, ge=0)
    # The model's ids on other Claude transports, per transport (a registry name): the first
    # is the transport's base id, the rest its other names (Bedrock's cross-region inference
    # profiles, such as "eu.anthropic.claude-sonnet-4-6"). A policy's [model] transport picks
    # one (:meth:`on_transport`); none listed: the model is not offered there.
    transports: TransportIds = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("transports")
    @classmethod
    def _transports_registered(
        cls, value: dict[str, tuple[str, ...]]
    ) -> dict[str, tuple[str, ...]]:
        unknown = sorted(set(value) - PROVIDER_NAMES)
        if unknown:
            raise ValueError(f"transports {unknown} are not registered providers")
        if any(not ids for ids in value.values()):
            raise ValueError("a transport lists at least one model id")
        return value

    def on_transport(self, transport: str | None, transport_id: str | None = None) -> ModelInfo:
        """This model as reached over ``transport`` (None, or its own provider: itself), under
        ``transport_id`` (None: the transport's base id): the same capabilities, the
        transport's provider, id and API version (its ``transports`` kept, so review still
        sees which transport it is reached over). KeyError when the model is not offered
        there or the id is not one of its names on it (review refuses such a policy first)."""
        if transport is None or transport == self.provider:
            return self
        ids = self.transports[transport]
        chosen = ids[0] if transport_id is None else transport_id
        if chosen not in ids:
            raise KeyError(chosen)
        # A cloud transport takes its own API version, in the body, for every model on it.
        version = capabilities(transport).body_version or self.api_version
        return self.model_copy(update={"id": chosen, "provider": transport, "api_version": version})

    @field_validator("provider")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in PROVIDER_NAMES:
            known = ", ".join(sorted(PROVIDER_NAMES))
            raise ValueError(f"provider {value!r} is not registered (known: {known})")
        return value

    @model_validator(mode="after")
    def _prices_sourced(self) -> Self:
        for fact in PRICE_FACTS:
            if getattr(self, fact) is not None and not _DATED.search(self.sources.get(fact, "")):
                raise ValueError(
                    f"{fact} is set without a dated source (sources.{fact} must say where "
                    "the price was read and on which date, YYYY-MM-DD)"
                )
        return self

    @property
    def honours_sampling(self) -> bool:
        return self.sampling != "none"
