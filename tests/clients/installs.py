"""Real third-party Claude clients, installed from the package registries once per test run.

Each client gets its own folder under the run's temporary directory: a virtual environment
for a Python framework (``pip install``), an npm prefix for a Node package (``npm install
--prefix``). The versions are pinned so that a run is repeatable (docs/clients.md describes
what each of them sends). pip's and npm's download caches make a second run quick.

An install that fails because the registry cannot be reached skips that client's tests with
the installer's own words as the reason; any other failure (a version that no longer
resolves, a broken wheel) fails them, so a real breakage is never hidden as a skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = [
    "NPM_CLIENTS",
    "PYTHON_CLIENTS",
    "NodeClient",
    "PythonClient",
    "install_npm",
    "install_python",
]

# What a bank's engineers install; bump deliberately (and re-check docs/clients.md).
PYTHON_CLIENTS: dict[str, tuple[str, ...]] = {
    "langchain-anthropic": ("langchain-anthropic==1.7.10",),
    "pydantic-ai": ("pydantic-ai-slim[anthropic]==2.68.0",),
}
NPM_CLIENTS: dict[str, tuple[str, ...]] = {
    "claude-code": ("@anthropic-ai/claude-code@2.1.197",),
    "typescript-sdk": ("@anthropic-ai/sdk@1.15.0",),
}

INSTALL_TIMEOUT_S = 900
# How pip and npm say that they could not reach the registry (not: that a package is broken).
_UNREACHABLE = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|ConnectTimeout|"
    r"ReadTimeout|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|"
    r"network request to .* failed|getaddrinfo",
)


@dataclass(frozen=True)
class PythonClient:
    """A virtual environment with one client installed; ``python`` runs scripts in it."""

    name: str
    folder: Path

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"


@dataclass(frozen=True)
class NodeClient:
    """An npm prefix with one package installed (``node_modules`` under ``folder``)."""

    name: str
    folder: Path

    def bin(self, command: str) -> Path:
        return self.folder / "node_modules" / ".bin" / command


def _run_install(name: str, command: list[str], cwd: Path | None = None) -> None:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, cwd=cwd
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"{name}: the registry did not answer within {INSTALL_TIMEOUT_S} s")
    if done.returncode == 0:
        return
    output = done.stdout + done.stderr
    reached = _UNREACHABLE.search(output)
    if reached is not None:
        line = next(
            (ln.strip() for ln in output.splitlines() if reached.group(0) in ln), reached.group(0)
        )
        pytest.skip(f"{name}: the package registry cannot be reached ({line[:200]})")
    tail = "\n".join(output.strip().splitlines()[-15:])
    pytest.fail(f"{name}: install failed (exit {done.returncode}):\n{tail}", pytrace=False)


def install_python(name: str, root: Path) -> PythonClient:
    """A fresh venv under ``root`` with ``PYTHON_CLIENTS[name]`` installed from the index."""
    client = PythonClient(name, root / name)
    if client.python.exists() and (client.folder / ".installed").exists():
        return client
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(client.folder)], check=True)
    _run_install(
        name,
        [
            str(client.python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *PYTHON_CLIENTS[name],
        ],
    )
    (client.folder / ".installed").touch()
    return client


def install_npm(name: str, root: Path) -> NodeClient:
    """``NPM_CLIENTS[name]`` installed with ``npm install --prefix`` under ``root``."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(f"{name}: node or npm is not installed, so the npm registry cannot be used")
    client = NodeClient(name, root / name)
    if (client.folder / ".installed").exists():
        return client
    client.folder.mkdir(parents=True, exist_ok=True)
    _run_install(
        name,
        [
            "npm",
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(client.folder),
            *NPM_CLIENTS[name],
        ],
    )
    (client.folder / ".installed").touch()
    return client
