"""Fixtures for the real-client tests: the clients (installed once per run), the loopback fake
Messages API and `gateway serve` as a real process over it (one per test module), with the
shipped policies and the shipped routing table plus the routes a bank adds for its callers
(``ROUTED``: extraction pipelines, coding agents and a review desk to their own tasks).

    def test_x(gateway: ServerProcess, langchain: PythonClient) -> None:
        key = caller_key(gateway, "desk-assistants")
        env = client_env(gateway, key, MODEL="claude-sonnet-4-6")
        out = run_python(langchain, "langchain_calls.py", "system", env)
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.installs import NodeClient, PythonClient, install_npm, install_python
from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import SHIPPED, ServerProcess, running_server

# Routes the bank adds for callers with a task of their own, as (caller, model, task); every
# other caller gets the shipped table's general_assistant for any current Claude model id.
ROUTED = [
    ("extraction-pipelines", "*", "structured_extraction"),
    ("coding-agents", "*", "coding_agent"),
    ("coding-agents-sonnet", "*", "coding_agent"),
    ("review-desk", "claude-sonnet-4-6", "compliance_review"),
]


@pytest.fixture(scope="session")
def clients_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this run installs the clients (each one on first use)."""
    return tmp_path_factory.mktemp("clients")


@pytest.fixture(scope="session")
def langchain(clients_root: Path) -> PythonClient:
    return install_python("langchain-anthropic", clients_root)


@pytest.fixture(scope="session")
def pydantic_ai(clients_root: Path) -> PythonClient:
    return install_python("pydantic-ai", clients_root)


@pytest.fixture(scope="session")
def claude_code(clients_root: Path) -> NodeClient:
    return install_npm("claude-code", clients_root)


@pytest.fixture(scope="session")
def typescript_sdk(clients_root: Path) -> NodeClient:
    return install_npm("typescript-sdk", clients_root)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI
) -> Iterator[ServerProcess]:
    """`gateway serve` with the shipped policies and routes (plus ``ROUTED``), the fake as its
    upstream."""
    home = tmp_path_factory.mktemp("serve")
    shutil.copytree(SHIPPED, home / "policies")
    with (home / "policies" / "routes.toml").open("a") as routes:
        for caller, model, task in ROUTED:
            routes.write(f'\n[[route]]\ncaller = "{caller}"\nmodel = "{model}"\ntask = "{task}"\n')
    with running_server(home, fake) as running:
        yield running


@pytest.fixture(autouse=True)
def _unscripted(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that failed before its client called leaves no scripted reply to the next."""
    yield
    if "fake" in request.fixturenames:
        request.getfixturevalue("fake").unscript()
