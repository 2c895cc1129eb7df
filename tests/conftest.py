"""Shared fixtures: a real PostgreSQL server for the run, fresh databases, temporary SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from tests.support.postgres import PostgresServer, running_postgres

pytest_plugins = ["tests.fakes.fixtures"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the PostgreSQL server is a ``postgres`` test, marked or not, so that
    the fast loop (``-m "not postgres"``) never starts the server."""
    for item in items:
        if "postgres_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """A SQLAlchemy URL to a new, empty PostgreSQL database."""
    return postgres_server.url(postgres_server.create_database())


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLAlchemy URL to a SQLite file that does not exist yet."""
    return f"sqlite:///{tmp_path / 'audit.db'}"


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """CLI entry points configure structlog globally; each test starts from the defaults."""
    yield
    structlog.reset_defaults()
