"""The request path's seams: one provider registry, one recorder, one error tree, a quiet library.

A provider is a protocol with one registry; nothing else compares provider names. Replay gets
its providers from the same registry. Every error a library caller sees is a GatewayError.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway import AuditUnavailable, ConfigurationError, Gateway, Settings
from gateway.catalog import ModelInfo
from gateway.providers.base import Provider
from gateway.providers.local import LocalProvider
from gateway.providers.registry import PROVIDER_NAMES, Providers
from gateway.replay import ReplaySession, Selection
from tests.gateway.conftest import MakeGateway, kinds

ROOT = Path(__file__).resolve().parents[2]


# -- the provider seam -------------------------------------------------------------------------


def test_the_local_provider_is_a_provider() -> None:
    provider: Provider = LocalProvider()
    assert isinstance(provider, Provider)
    assert provider.name == "local"


def test_the_registry_builds_each_provider_once_and_only_when_asked() -> None:
    built: list[str] = []

    def local(_settings: Settings) -> Provider:
        built.append("local")
        return LocalProvider()

    providers = Providers(Settings(), overrides={"local": local})
    assert built == []
    first = providers.get("local")
    assert providers.get("local") is first
    assert built == ["local"]
    providers.close()


def test_a_provider_that_cannot_be_built_says_why() -> None:
    providers = Providers(Settings(anthropic_api_key=None))
    with pytest.raises(ConfigurationError, match="no Anthropic API key"):
        providers.get("anthropic")
    with pytest.raises(ConfigurationError, match="no provider is registered"):
        providers.get("openai")
    # Claude ids are fixed models: keying a request needs no provider (a replay hit, no key).
    assert providers.model_version("anthropic", "claude-sonnet-4-6") is None
    assert str(providers.model_version("local", "local:ngram")).startswith("sha256:")


def test_the_catalog_accepts_only_registered_providers() -> None:
    entry = {
        "id": "m",
        "pinned": True,
        "api_version": "v",
        "sampling": "none",
        "top_k": False,
        "max_output_tokens": 1,
        "context_window": 1,
        "lifecycle": "active",
    }
    for name in PROVIDER_NAMES:
        assert ModelInfo.model_validate({**entry, "provider": name}).provider == name
    with pytest.raises(ValueError, match="not registered"):
        ModelInfo.model_validate({**entry, "provider": "openai"})


# Comparisons of a provider name with a string literal, e.g. `provider == "local"`.
_NAME_COMPARISON = re.compile(
    r"""(==|!=)\s*["'](anthropic|local)["']|["'](anthropic|local)["']\s*(==|!=)"""
)
# Provider or transport names and model-name prefixes tested as text: `id.startswith("local:")`,
# `name.startswith(("claude", "anthropic."))`, `"bedrock" in provider`, `provider in ("local",)`.
_NAMES = r"(anthropic|local|claude|bedrock|vertex|foundry)"
_PREFIX_TEST = re.compile(
    rf"""\.(startswith|endswith)\(\s*\(?\s*["']{_NAMES}"""
    rf"""|["']{_NAMES}[-:.]?["']\s+(not\s+)?in\s"""
    rf"""|\s(not\s+)?in\s+[(\[{{]\s*["']{_NAMES}["']"""
)


def _offends(line: str) -> bool:
    return (
        bool(_NAME_COMPARISON.search(line) or _PREFIX_TEST.search(line))
        or ".provider ==" in line
        or ".provider !=" in line
    )


def test_the_name_check_finds_each_kind_of_comparison() -> None:
    for line in (
        'if model.provider == "local":',
        'if "anthropic" != name:',
        'if policy.model_id.startswith("local:"):',
        'if model_id.startswith(("claude-", "anthropic.")):',
        'if "bedrock" in provider:',
        'if name in ("local", "offline"):',
        "if name not in ['vertex']:",
    ):
        assert _offends(line), line
    for line in (
        'if line.startswith("@@"):',
        'if stripped.startswith((b"event:", b"data:")):',
        "if capabilities(model.provider).offline:",
        'OFFLINE_MODEL = "local:ngram"',
    ):
        assert not _offends(line), line


def test_no_provider_name_is_compared_outside_the_registry() -> None:
    """Nothing outside the registry and the catalog tells providers, transports or models
    apart by their names: a provider's capabilities are the registry's answer."""
    allowed = {
        ROOT / "gateway" / "providers" / "registry.py",
        # `models sync` reads one provider's Models API, so it picks that provider's rows.
        ROOT / "gateway" / "catalog" / "sync.py",
    }
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "gateway").rglob("*.py"))
        if path not in allowed
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _offends(line)
    ]
    assert offenders == []


# -- one error tree ------------------------------------------------------------------------------


def test_keyword_settings_are_checked_like_the_environment(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="durability"):
        Gateway(durability="bogus", database_url=f"sqlite:///{tmp_path / 'a.db'}")
    with pytest.raises(ConfigurationError, match="request_timeout_s"):
        Settings(request_timeout_s=0)


def test_a_database_that_cannot_be_opened_is_a_gateway_error(
    tmp_path: Path, policy_dir: Path
) -> None:
    not_a_db = tmp_path / "notes.db"
    not_a_db.write_bytes(b"this is not a database" * 100)
    settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{not_a_db}")
    with pytest.raises(AuditUnavailable):
        Gateway(settings)
    with pytest.raises(AuditUnavailable):
        ReplaySession.open(settings)


def test_replay_of_an_unknown_request_is_an_input_error(
    make_gateway: MakeGateway, db_path: Path, policy_dir: Path
) -> None:
    make_gateway(offline=True).complete("offline_demo", "The reviewer")
    settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}")
    with ReplaySession.open(settings) as session, pytest.raises(Exception) as caught:
        session.prepare(Selection(request_ids=("req_missing",)))
    assert type(caught.value).__module__ == "gateway.errors"
    assert kinds(db_path) == ["request", "response"]  # nothing recorded by a refused replay


def test_live_replay_records_through_the_gateways_recorder(
    make_gateway: MakeGateway, db_path: Path, policy_dir: Path
) -> None:
    result = make_gateway(offline=True).complete("offline_demo", "The reviewer")
    settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}")
    with ReplaySession.open(settings) as session:
        report = session.run(
            session.prepare(Selection(request_ids=(result.request_id,)), live=True)
        )
    [row] = report.requests
    assert row.outcome.value in {"identical", "differing"}
    # intent, then outcome, with the ACCESS of the recorded answer it showed
    assert kinds(db_path)[-3:] == ["replay", "replay", "access"]


# -- a library stays quiet -------------------------------------------------------------------------

_QUIET = """
import sys
from gateway import Gateway
with Gateway(policy_dir=sys.argv[1], database_url=sys.argv[2], offline=True) as gw:
    gw.complete("offline_demo", "The reviewer")
    try:
        gw.complete("no_such_task", "x")
    except Exception:
        pass
"""


def _run_host(code: str, policy_dir: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, str(policy_dir), f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )


@pytest.mark.slow  # a host process
def test_the_library_writes_nothing_when_the_host_configured_no_logging(
    tmp_path: Path, policy_dir: Path
) -> None:
    done = _run_host(_QUIET, policy_dir, tmp_path / "quiet.db")
    assert (done.stdout, done.stderr) == ("", "")


@pytest.mark.slow  # a host process
def test_a_host_that_configures_logging_gets_the_events(tmp_path: Path, policy_dir: Path) -> None:
    code = "import logging; logging.basicConfig(level='INFO')\n" + _QUIET
    done = _run_host(code, policy_dir, tmp_path / "host.db")
    assert done.stdout == ""
    assert "request_completed" in done.stderr and "request_rejected" in done.stderr
    assert "The reviewer" not in done.stderr  # facts about a request, never its text
