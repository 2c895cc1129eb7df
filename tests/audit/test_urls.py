"""Database URLs in messages: never the password, and an unknown driver is one clear line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from audit import AuditStore, DatabaseUnavailable
from audit.store.backend import Backend
from gateway.cli import main

SECRET = "hunter2"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"postgresql+nosuch://alice:{SECRET}@db/audit", "no database driver"),
        (f"postgresql+pg8000://alice:{SECRET}@db/audit", "no database driver"),
        (f"sqlite+nosuch://alice:{SECRET}@/audit.db", "no database driver"),
    ],
)
def test_unknown_driver_is_unavailable_without_the_password(url: str, message: str) -> None:
    with pytest.raises(DatabaseUnavailable, match=message) as caught:
        AuditStore.open(url)
    text = str(caught.value)
    assert SECRET not in text
    assert "\n" not in text
    assert caught.value.hint and "postgresql+psycopg" in caught.value.hint


@pytest.mark.parametrize("driver", ["nosuch", "pg8000"])
def test_cli_never_prints_the_password(driver: str) -> None:
    env = {"GATEWAY_DATABASE_URL": f"postgresql+{driver}://alice:{SECRET}@db/audit"}
    result = CliRunner().invoke(main, ["audit", "verify"], env=env)
    assert result.exit_code == 4, result.output
    assert SECRET not in result.output
    assert "alice:***@db" in result.output


def test_backend_url_hides_the_password() -> None:
    # create_engine does not connect, so no server is needed to see what the URL renders as
    backend = Backend.connect(f"postgresql://alice:{SECRET}@127.0.0.1:1/audit", "fsync")
    try:
        assert backend.url == "postgresql+psycopg://alice:***@127.0.0.1:1/audit"
        assert backend.writer.url.password == SECRET  # the engine still logs in with it
    finally:
        backend.dispose()
