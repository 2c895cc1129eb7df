"""A throwaway PostgreSQL cluster for the test run.

PostgreSQL refuses to run as root, so when the tests run as root (as in CI) the cluster is
created and started as the unprivileged user ``nobody`` in a temporary folder. It listens on
127.0.0.1 only, on a free port, with trust authentication, and is removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

SUPERUSER = "gateway_admin"


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    datadir: Path

    def url(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        return f"postgresql+psycopg://{user}@{self.host}:{self.port}/{database}"

    def dsn(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        return f"host={self.host} port={self.port} dbname={database} user={user}"

    def create_database(self) -> str:
        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def stop(self) -> None:
        _as_postgres_user(["pg_ctl", "-D", str(self.datadir), "-m", "fast", "-w", "stop"])

    def start(self) -> None:
        _as_postgres_user(
            [
                "pg_ctl",
                "-D",
                str(self.datadir),
                "-l",
                str(self.datadir / "server.log"),
                "-w",
                "start",
            ]
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres_user(argv: list[str]) -> None:
    if os.geteuid() == 0:
        argv = ["runuser", "-u", "nobody", "--", *argv]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        raise RuntimeError("initdb/pg_ctl not on PATH: install Debian's postgresql package")
    root = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
    datadir = root / "data"
    sockets = root / "sock"
    sockets.mkdir()
    if os.geteuid() == 0:
        for path in (root, sockets):
            os.chown(path, 65534, 65534)
    port = _free_port()
    _as_postgres_user(
        ["initdb", "-D", str(datadir), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-locale"]
    )
    conf = datadir / "postgresql.conf"
    with conf.open("a") as f:
        f.write(
            f"\nlisten_addresses = '127.0.0.1'\nport = {port}\n"
            f"unix_socket_directories = '{sockets}'\nmax_connections = 200\n"
            "fsync = on\n"
        )
    server = PostgresServer("127.0.0.1", port, datadir)
    server.start()
    try:
        _wait_ready(server)
        yield server
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _wait_ready(server: PostgresServer) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(server.dsn(), connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
