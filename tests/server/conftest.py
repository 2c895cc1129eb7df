"""`gateway serve` as a real process on a loopback port, the loopback fake as its upstream.

    with running_server(tmp_path, fake) as server:
        key = server.create_key("payments-svc")
        client = anthropic.Anthropic(base_url=server.base_url, api_key=key)

One server per test module (the ``server`` fixture); the lifecycle tests start their own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx
import pytest

from audit import AuditStore, StoredEvent
from tests.fakes.messages_api import FakeMessagesAPI

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "policies"
UPSTREAM_KEY = "sk-ant-test-UPSTREAM-never-leaves-the-gateway"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServerProcess:
    home: Path
    env: dict[str, str]
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    # Where the server's stdout goes when not into its log (stderr): spans, for one.
    stdout_path: Path | None = None
    # A server started with --tls-cert: the CA that signed its certificate, which every
    # client here (the readiness check included) trusts; the URLs are https.
    tls_ca: Path | None = None
    # A server that requires client certificates (mutual TLS): the readiness check presents
    # this certificate and key.
    tls_client: tuple[Path, Path] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.home / "serve.log"

    @property
    def base_url(self) -> str:
        scheme = "https" if self.tls_ca is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def db_path(self) -> Path:
        return self.home / "audit.db"

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "gateway", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=self.home,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"gateway {' '.join(args)}: {done.returncode} {done.stderr}")
        return done

    def create_key(self, caller: str) -> str:
        return self.cli("keys", "create", "--caller", caller).stdout.strip()

    def start(self, *extra: str, ready_within: float = 120) -> None:
        self.port = free_port()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--port", str(self.port), *extra],
            env=self.env,
            stdout=self.stdout_path.open("ab") if self.stdout_path else log,
            stderr=log,
            cwd=self.home,
        )
        deadline = time.monotonic() + ready_within
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"gateway serve exited: {self.log_path.read_text()}")
            try:
                verify: ssl.SSLContext | bool = True
                if self.tls_ca is not None:
                    verify = ssl.create_default_context(cafile=str(self.tls_ca))
                    if self.tls_client is not None:
                        verify.load_cert_chain(*self.tls_client)
                ready = httpx.get(f"{self.base_url}/readyz", timeout=1, verify=verify)
                if ready.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"gateway serve did not become ready: {self.log_path.read_text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def log_events(self) -> list[dict[str, object]]:
        events = []
        for line in self.log_path.read_text().splitlines():
            if line.startswith("{"):
                events.append(json.loads(line))
        return events

    def audit_events(self) -> list[StoredEvent]:
        with AuditStore.open(self.env["GATEWAY_DATABASE_URL"], "os", create=False) as store:
            return list(store.iter_events())

    def verify(self) -> subprocess.CompletedProcess[str]:
        return self.cli("audit", "verify", check=False)


def server_env(home: Path, upstream: str, **extra: str) -> dict[str, str]:
    policies = home / "policies"
    if not policies.exists():
        shutil.copytree(SHIPPED, policies)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GATEWAY_", "ANTHROPIC_"))
    }
    env.update(
        {
            "GATEWAY_POLICY_DIR": str(policies),
            "GATEWAY_DATABASE_URL": f"sqlite:///{home / 'audit.db'}",
            "GATEWAY_DURABILITY": "os",
            "GATEWAY_SERVER_KEY_REFRESH_S": "0.5",
            "ANTHROPIC_API_KEY": UPSTREAM_KEY,
            "ANTHROPIC_BASE_URL": upstream,
            "PYTHONPATH": str(ROOT),
        }
    )
    env.update(extra)
    return env


@contextmanager
def running_server(
    home: Path, fake: FakeMessagesAPI, *args: str, **env: str
) -> Iterator[ServerProcess]:
    server = ServerProcess(home, server_env(home, fake.base_url, **env))
    server.cli("db", "upgrade")
    server.start(*args)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI
) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("serve"), fake) as running:
        yield running
