"""A refused upstream connection names the address that refused it, and where to fix it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gateway import Gateway, Settings, UpstreamUnavailable


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


def test_a_refused_connection_is_named_with_its_url(policy_dir: Path, tmp_path: Path) -> None:
    port = _closed_port()
    settings = Settings(
        policy_dir=policy_dir,
        database_url=f"sqlite:///{tmp_path / 'audit.db'}",
        anthropic_api_key="sk-ant-refused-upstream",
        anthropic_base_url=f"http://127.0.0.1:{port}",
        default_caller="tests",
        durability="os",
        max_attempts=2,
        retry_backoff_base_s=0,
    )
    with Gateway(settings) as gw, pytest.raises(UpstreamUnavailable) as failed:
        gw.complete("quant_strategy", "Is anyone there?")
    assert f"http://127.0.0.1:{port}" in str(failed.value)
    assert "ANTHROPIC_BASE_URL" in str(failed.value)
    assert "usually temporary" not in str(failed.value)
