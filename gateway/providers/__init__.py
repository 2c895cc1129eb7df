"""Providers: the ``Provider`` protocol (``base``), the one registry (``registry``), and the
providers themselves: Claude through the wire layer (``anthropic`` over ``wire``) and the
offline local model (``local``). Callers import from those public modules; this package
exports nothing of its own.

    providers = Providers(settings)                 # gateway.providers.registry
    provider = providers.get(model.provider)        # a Provider (base): send, stream, ...
"""

__all__: list[str] = []
