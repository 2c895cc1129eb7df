"""The one registry of model providers: which names exist, and one instance of each, built lazily.

    providers = Providers(settings)
    provider = providers.get(model.provider)       # built on first use, then shared
    providers.model_version(model.provider, model.id)
    capabilities(model.provider).inference_geo     # asked without building the provider
    providers.close()

Adding a provider is a module implementing :class:`gateway.providers.base.Provider`, one
:class:`ProviderSpec` in :data:`PROVIDERS`, its catalog rows and its settings. A Claude
transport (Bedrock, Vertex) is the same four places, its module being a wire profile, its
credentials and a :class:`~gateway.providers.wire.MessagesProvider` built from them, as
:mod:`gateway.providers.anthropic` is for Anthropic's own API. Nothing outside this module
compares provider names: the catalog checks its ``provider`` values against
:data:`PROVIDER_NAMES`, everything else asks the registry for a provider by name, and what a
provider can do (run offline, honour ``inference_geo``, which model its answers name) is its
:class:`~gateway.providers.base.Capabilities`, asked through :func:`capabilities`.

Providers are built on first use so that a command that never calls Claude never imports the
SDK (about a second) and needs no API key; :meth:`Providers.warm` builds the ones a service
will need at start-up instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gateway.errors import ConfigurationError
from gateway.providers.base import Capabilities, Provider
from gateway.settings import Settings

__all__ = [
    "PROVIDERS",
    "PROVIDER_NAMES",
    "ProviderFactory",
    "ProviderSpec",
    "Providers",
    "capabilities",
    "runs_offline",
]

ProviderFactory = Callable[[Settings], Provider]


@dataclass(frozen=True)
class ProviderSpec:
    """How to build one provider, and what is known of it without building it.

    ``versioned_models``: the provider's model ids do not fix a model (a local model's weights
    can change under the same id), so its ``model_version`` goes into the request key. False
    for Claude, whose pinned ids are fixed models; then no provider need be built to key a
    request (a replay hit needs no API key).
    """

    name: str
    build: ProviderFactory
    capabilities: Capabilities = field(default_factory=Capabilities)
    versioned_models: bool = False
    # The cloud region the provider is configured to send to (None: it has no region).
    region: Callable[[Settings], str | None] = lambda _settings: None


def _call_options(settings: Settings) -> dict[str, Any]:
    """A Claude transport's timeout and retry options, the same for every transport."""
    return {
        "timeout_s": settings.request_timeout_s,
        "max_attempts": settings.max_attempts,
        "retry_after_cap_s": settings.retry_after_cap_s,
        "backoff_base_s": settings.retry_backoff_base_s,
    }


def _build_anthropic(settings: Settings) -> Provider:
    key = settings.anthropic_api_key
    if key is None or not key.get_secret_value():
        raise ConfigurationError(
            "no Anthropic API key is set, so this task cannot reach Claude.",
            hint="Set ANTHROPIC_API_KEY, or run offline on the local model "
            "(gateway ask --offline ...).",
        )
    # Imported here: the SDK costs about a second of start-up.
    from gateway.providers.anthropic import AnthropicProvider

    return AnthropicProvider(
        api_key=key.get_secret_value(),
        base_url=settings.anthropic_base_url,
        **_call_options(settings),
    )


def _build_bedrock(settings: Settings) -> Provider:
    region = settings.bedrock_region
    if not region:
        raise ConfigurationError(
            "no AWS region is set for Bedrock, so this task cannot reach Claude on Bedrock.",
            hint="Set GATEWAY_BEDROCK_REGION (the policy's [model] region names the one it "
            "needs); AWS credentials come from the standard chain.",
        )
    from gateway.providers.bedrock import BedrockProvider

    return BedrockProvider(
        region=region,
        profile=settings.bedrock_profile,
        base_url=settings.bedrock_base_url,
        **_call_options(settings),
    )


def _build_vertex(settings: Settings) -> Provider:
    project, region = settings.vertex_project, settings.vertex_region
    if not project or not region:
        raise ConfigurationError(
            "no Google Cloud project or region is set for Vertex AI, so this task cannot "
            "reach Claude on Vertex.",
            hint="Set GATEWAY_VERTEX_PROJECT and GATEWAY_VERTEX_REGION; Google credentials "
            "come from Application Default Credentials.",
        )
    from gateway.providers.vertex import VertexProvider

    return VertexProvider(
        project=project,
        region=region,
        base_url=settings.vertex_base_url,
        **_call_options(settings),
    )


def _build_local(_settings: Settings) -> Provider:
    from gateway.providers.local import LocalProvider

    return LocalProvider()


PROVIDERS: Mapping[str, ProviderSpec] = MappingProxyType(
    {
        "anthropic": ProviderSpec("anthropic", _build_anthropic, Capabilities(inference_geo=True)),
        # inference_geo is the first-party API's: on a cloud the region is the endpoint's.
        "bedrock": ProviderSpec(
            "bedrock",
            _build_bedrock,
            Capabilities(body_version="bedrock-2023-05-31", counts_tokens=False),
            region=lambda settings: settings.bedrock_region,
        ),
        "vertex": ProviderSpec(
            "vertex",
            _build_vertex,
            Capabilities(body_version="vertex-2023-10-16"),
            region=lambda settings: settings.vertex_region,
        ),
        "local": ProviderSpec(
            "local",
            _build_local,
            Capabilities(offline=True),
            versioned_models=True,
        ),
    }
)
PROVIDER_NAMES = frozenset(PROVIDERS)


def capabilities(name: str) -> Capabilities:
    """What the provider called ``name`` can do (asked without building it)."""
    return PROVIDERS[_known(name)].capabilities


def runs_offline(name: str) -> bool:
    """Whether the provider called ``name`` answers in-process (nothing leaves the machine)."""
    return capabilities(name).offline


class Providers:
    """One instance per provider name, built on first use; safe to share across threads.

    ``overrides`` replaces how named providers are built (tests and tools pass a provider
    configured differently); the names themselves come from :data:`PROVIDERS` only.
    """

    def __init__(
        self, settings: Settings, *, overrides: Mapping[str, ProviderFactory] | None = None
    ) -> None:
        unknown = set(overrides or {}) - PROVIDER_NAMES
        if unknown:
            raise ConfigurationError(f"unknown provider(s): {', '.join(sorted(unknown))}.")
        self._settings = settings
        self._factories = {
            name: (overrides or {}).get(name, spec.build) for name, spec in PROVIDERS.items()
        }
        self._built: dict[str, Provider] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Provider:
        """The provider called ``name``; raises ConfigurationError when it cannot be built."""
        provider = self._built.get(name)
        if provider is not None:
            return provider
        with self._lock:  # one provider (and connection pool) per gateway
            provider = self._built.get(name)
            if provider is None:
                provider = self._factories[_known(name)](self._settings)
                self._built[name] = provider
            return provider

    def region(self, name: str) -> str | None:
        """The cloud region the provider called ``name`` sends to, from the settings (asked
        without building it; None for a provider without regions)."""
        return PROVIDERS[_known(name)].region(self._settings)

    def versioned(self, name: str) -> bool:
        """Whether ``name``'s models have versions beyond their ids (finding one may build
        the model: :meth:`model_version` is then not mere CPU work)."""
        return PROVIDERS[_known(name)].versioned_models

    def model_version(self, name: str, model_id: str) -> str | None:
        """What fixes ``model_id`` beyond its id, for the request key (None: the id does)."""
        if not PROVIDERS[_known(name)].versioned_models:
            return None
        return self.get(name).model_version(model_id)

    def warm(self, names: Iterable[str]) -> None:
        """Build the named providers now where they can be built (a service pays the SDK's
        import at start-up, not on its first request); one that cannot is left to fail, with
        its explanation, when a request needs it."""
        for name in set(names):
            try:
                self.get(name)
            except ConfigurationError:
                continue

    def close(self) -> None:
        with self._lock:
            built, self._built = list(self._built.values()), {}
        for provider in built:
            provider.close()

    async def aclose(self) -> None:
        with self._lock:
            built, self._built = list(self._built.values()), {}
        for provider in built:
            await provider.aclose()


def _known(name: str) -> str:
    if name not in PROVIDERS:
        raise ConfigurationError(
            f"no provider is registered under the name {name!r}.",
            hint=f"Known providers: {', '.join(sorted(PROVIDER_NAMES))}.",
        )
    return name
