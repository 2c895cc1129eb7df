"""Fixtures for what the answer says about itself: the gateway fixtures, and a task written
into the test's policy folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway import Gateway
from tests.gateway.conftest import (  # noqa: F401 - fixtures, used by name
    MakeGateway,
    db_path,
    gw,
    make_gateway,
    policy_dir,
)

SALT = "per-deployment-secret-5f1c2a9e"

TASK = """\
schema = 1
description = "A test task."
owner = "tests"

[model]
id = "claude-sonnet-4-6"
{model}

[generation]
max_tokens = 1024
{generation}

[prompt]
system_file = "prompts/compliance_review.md"

[caller]
{caller}
"""

WriteTask = Callable[..., str]


@pytest.fixture
def write_task(policy_dir: Path) -> WriteTask:  # noqa: F811
    """Write ``NAME.toml`` into the policy folder (before the gateway is built); returns NAME."""

    def write(name: str, *, model: str = "", generation: str = "", caller: str = "") -> str:
        text = TASK.format(model=model, generation=generation, caller=caller)
        (policy_dir / f"{name}.toml").write_text(text, encoding="utf-8")
        return name

    return write


def count_tokens(gateway: Gateway, task: str, prompt: str | None = None, **given: Any) -> int:
    """``Gateway.count_tokens``; through the gateway's pipeline until the client exposes it."""
    method = getattr(gateway, "count_tokens", None)
    if method is not None:
        return int(method(task, prompt, **given))
    return gateway._core.pipeline.count_tokens(task, prompt=prompt, **given)


@pytest.fixture
def salted_gateway(make_gateway: MakeGateway) -> Callable[..., Gateway]:  # noqa: F811
    """A gateway whose settings carry GATEWAY_USER_ID_SALT, handed to its pipeline (the
    client passes it once ``Settings.user_id_salt`` is wired there)."""

    def make(salt: str = SALT, **changes: Any) -> Gateway:
        gateway = make_gateway(user_id_salt=salt, **changes)
        pipeline = gateway._core.pipeline
        if pipeline._user_id_salt is None:
            pipeline._user_id_salt = gateway.settings.user_id_salt
        return gateway

    return make
