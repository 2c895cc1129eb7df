"""Settings never show the database password; the code that opens the database still gets it."""

from __future__ import annotations

import json

import pytest

from gateway.settings import Settings, mask_database_url

SECRET = "s3cret"


def _renderings(settings: Settings) -> dict[str, str]:
    return {
        "repr": repr(settings),
        "str": str(settings),
        "f-string": f"{settings}",
        "model_dump": repr(settings.model_dump()),
        "model_dump json mode": json.dumps(settings.model_dump(mode="json")),
        "model_dump_json": settings.model_dump_json(),
        "masked": settings.database_url_masked,
    }


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql+psycopg://app:{SECRET}@db/audit", "postgresql+psycopg://app:***@db/audit"),
        (f"postgresql://app:{SECRET}@db:5432/audit?sslmode=require",
         "postgresql://app:***@db:5432/audit?sslmode=require"),
        (f"postgresql+psycopg://app@db/audit?password={SECRET}",
         "postgresql+psycopg://app@db/audit?password=***"),
        # An unquoted "@" in the password: nothing before the last "@" is shown.
        (f"postgresql+psycopg://app:x@{SECRET}@db/audit", "postgresql+psycopg://***@db/audit"),
    ],
)  # fmt: skip
def test_every_rendering_masks_the_password_and_the_field_keeps_it(url: str, shown: str) -> None:
    settings = Settings(database_url=url)
    for name, text in _renderings(settings).items():
        assert SECRET not in text, name
        assert shown in text, name
    assert settings.database_url == url  # what AuditStore.open() is given


@pytest.mark.parametrize(
    "url", ["sqlite:////var/lib/gateway/audit@2024.db", "sqlite:///audit.db?lock_timeout=0.3"]
)
def test_a_sqlite_path_is_shown_as_written(url: str) -> None:
    settings = Settings(database_url=url)
    for name, text in _renderings(settings).items():
        assert url in text, name
    assert settings.database_url == url


def test_settings_from_the_environment_mask_it_too() -> None:
    url = f"postgresql+psycopg://app:{SECRET}@db/audit"
    settings = Settings.from_env({"GATEWAY_DATABASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-k"})
    assert settings.database_url == url
    assert not [name for name, text in _renderings(settings).items() if SECRET in text]
    assert "sk-ant-k" not in repr(settings) and "sk-ant-k" not in settings.model_dump_json()


@pytest.mark.parametrize("text", ["", "not a url", f"app:{SECRET}@db", f"x://a:{SECRET}@h/p"])
def test_a_string_that_is_no_url_shows_no_credentials(text: str) -> None:
    assert SECRET not in mask_database_url(text)
