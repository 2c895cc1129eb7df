"""``gateway serve``: an Anthropic-compatible Messages endpoint over the gateway.

    from gateway.server import create_app, serve
    serve(Settings.from_env(), host="127.0.0.1", port=8080)

Any official Anthropic SDK pointed at it (``base_url``) goes through the policy engine and
the audit log: the request's ``model`` names the task, the caller key names the caller.
See docs/server.md.
"""

from gateway.server._app import app_from_env, create_app
from gateway.server._otel import check_tracing
from gateway.server._run import check_address, serve
from gateway.server._self_loop import check_not_self
from gateway.server._tls import check_tls

__all__ = [
    "app_from_env",
    "check_address",
    "check_not_self",
    "check_tls",
    "check_tracing",
    "create_app",
    "serve",
]
