"""The test configuration keeps every test on loopback."""

from __future__ import annotations

import socket

import psycopg
import pytest
from pytest_socket import SocketConnectBlockedError

from tests.support.postgres import PostgresServer


def test_connecting_beyond_loopback_is_blocked() -> None:
    with (
        pytest.raises(SocketConnectBlockedError),
        socket.create_connection(("192.0.2.1", 443), timeout=1),
    ):
        pass


def test_loopback_postgres_is_reachable(postgres_server: PostgresServer) -> None:
    with psycopg.connect(postgres_server.dsn()) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
