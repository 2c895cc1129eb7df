"""Static test credentials for the cloud fakes, and a Vertex provider that uses one.

    env = aws_test_environment(tmp_path)       # botocore's standard chain finds these first
    gw = Gateway(settings, providers={"vertex": vertex_with_token()})

Bedrock's credentials come from botocore's standard chain, so a test (or a process it starts)
sets the environment: a static key, no shared files, no instance metadata, no bearer token.
Vertex's standard chain (Application Default Credentials) would look for real Google
credentials, so the provider is built with a static access token instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gateway.providers.vertex import VertexProvider
from gateway.settings import Settings

__all__ = [
    "AWS_KEY_ID",
    "AWS_SECRET",
    "BEARER_TOKEN_VARIABLE",
    "GOOGLE_TOKEN",
    "aws_test_environment",
    "vertex_with_token",
]

AWS_KEY_ID = "AKIDTESTFAKE0000"
AWS_SECRET = "test-secret-never-on-the-wire"
GOOGLE_TOKEN = "ya29.test-token-never-recorded"
# Removed from a test's environment: with it set, the SDK would send it instead of signing.
BEARER_TOKEN_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"


def aws_test_environment(home: Path) -> dict[str, str]:
    """The environment under which botocore finds only the static test key."""
    return {
        "AWS_ACCESS_KEY_ID": AWS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "AWS_CONFIG_FILE": str(home / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def vertex_with_token(token: str = GOOGLE_TOKEN) -> Callable[[Settings], VertexProvider]:
    """A provider factory for ``Gateway(providers=...)``: Vertex from the settings, with
    ``token`` as its access token."""

    def build(settings: Settings) -> VertexProvider:
        assert settings.vertex_project and settings.vertex_region
        return VertexProvider(
            project=settings.vertex_project,
            region=settings.vertex_region,
            access_token=token,
            base_url=settings.vertex_base_url,
        )

    return build
