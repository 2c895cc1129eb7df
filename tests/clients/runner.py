"""Run one client scenario as its own process against `gateway serve` and read its verdict.

A client script prints one JSON object as its last line of output: ``{"value": ...}`` when the
call succeeded, ``{"error": {"status": 400, "message": "..."}}`` when the gateway refused it.
The client process gets only the environment it needs: the gateway's address and a caller key,
never the upstream key.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.clients.installs import NodeClient, PythonClient
from tests.server.conftest import ServerProcess

__all__ = [
    "SCRIPTS",
    "caller_key",
    "claude_env",
    "client_env",
    "last_json",
    "run_claude",
    "run_node",
    "run_python",
    "run_python_all",
    "verdicts",
]

SCRIPTS = Path(__file__).resolve().parent / "scripts"
CLIENT_TIMEOUT_S = 120


def caller_key(server: ServerProcess, caller: str, task: str | None = None) -> str:
    """A new gateway caller key; with ``task``, requests for a real model id route to it."""
    args = ["keys", "create", "--caller", caller]
    if task is not None:
        args += ["--task", task]
    return server.cli(*args).stdout.strip()


def client_env(server: ServerProcess, key: str, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GATEWAY_URL": server.base_url,
        "GATEWAY_KEY": key,
    }
    env.update(extra)
    return env


def verdicts(done: subprocess.CompletedProcess[str], count: int = 1) -> list[dict[str, Any]]:
    """The last ``count`` JSON lines the client printed (one per scenario)."""
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if len(lines) < count:
        raise AssertionError(f"exit {done.returncode}; no verdict printed:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in lines[-count:]]


def last_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return verdicts(done)[0]


def run_python(
    client: PythonClient, script: str, scenario: str, env: dict[str, str]
) -> dict[str, Any]:
    return run_python_all(client, script, [scenario], env)[scenario]


def run_python_all(
    client: PythonClient, script: str, scenarios: list[str], env: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Several scenarios in one client process (one interpreter start): verdict by scenario."""
    done = subprocess.run(
        [str(client.python), str(SCRIPTS / script), *scenarios],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
    )
    return dict(zip(scenarios, verdicts(done, len(scenarios)), strict=True))


def run_node(client: NodeClient, script: str, scenario: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(SCRIPTS / script), scenario],
        env={**env, "NODE_PATH": str(client.folder / "node_modules")},
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
        cwd=client.folder,
    )
    return last_json(done)


def claude_env(server: ServerProcess, key: str, home: Path) -> dict[str, str]:
    """What `claude -p` needs to work through the gateway, and nothing else: the gateway as its
    API, the caller key as its API key, a fresh HOME, and no traffic but the API calls."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": server.base_url,
        "ANTHROPIC_API_KEY": key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def run_claude(
    client: NodeClient, prompt: str, env: dict[str, str], workdir: Path, *args: str
) -> dict[str, Any]:
    """`claude -p PROMPT --output-format json ARGS` in ``workdir``; its result object."""
    done = subprocess.run(
        [str(client.bin("claude")), "-p", prompt, "--output-format", "json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
    )
    return last_json(done)
