"""Debug logging cannot leak the API key, the headers or the prompt text.

Two ways a deployment turns the SDK's debug logging on: ``ANTHROPIC_LOG=debug`` in the
environment, and a host application that calls ``logging.basicConfig(level=logging.DEBUG)``.
Either way the SDK would log its request options (the ``Authorization`` header, the system
prompt and the messages). Each case runs in a real subprocess that makes a real call through
the gateway to the loopback fake, and its whole stdout and stderr are scanned. The guard's
own behaviour (the SDK's warnings still reach the host, with secrets withheld) is tested in
process below.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.logging import SDK_LOGGERS, WITHHELD, SdkLogGuard, hold_sdk_loggers
from gateway.providers.wire import _sdk  # noqa: F401 - imports the SDK, as the provider does
from tests.fakes.messages_api import FakeMessagesAPI

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
API_KEY = "sk-ant-api03-LOGCANARY-" + uuid.uuid4().hex
PROMPT = "PROMPTCANARY" + uuid.uuid4().hex[:12] + " wire 9,800 EUR"
SYSTEM = "SYSTEMCANARY" + uuid.uuid4().hex[:12]
HOST_MARK = "HOSTDEBUGMARK"

# A host application: its own DEBUG logging set up before or after the SDK is imported.
LIBRARY_HOST = f"""
import logging, sys
mode, policy_dir, db_url, base_url, api_key, prompt = sys.argv[1:]
if mode == "sdk-first":
    import anthropic  # the host imported the SDK itself, before the gateway
if mode != "env":
    logging.basicConfig(level=logging.DEBUG)
if mode == "child-debug":  # a host that asks for the SDK's HTTP internals by name
    logging.getLogger("anthropic._base_client").setLevel(logging.DEBUG)
    logging.getLogger("httpcore2.http11").setLevel(logging.DEBUG)
from gateway import Gateway
logging.getLogger("host").debug("{HOST_MARK}")
with Gateway(policy_dir=policy_dir, database_url=db_url, anthropic_api_key=api_key,
             base_url=base_url, durability="os") as gw:
    print(gw.complete("compliance_review", prompt, caller="payments-svc").text)
"""


@pytest.fixture
def policy_dir(tmp_path: Path) -> Iterator[Path]:
    """The shipped policies, with a system prompt the scan can recognise."""
    target = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", target)
    (target / "prompts" / "compliance_review.md").write_text(f"{SYSTEM} Review it.\n")
    yield target


def _run(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        args,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


def _leaks(output: str) -> list[str]:
    needles = {
        "api key": API_KEY,
        "api key tail": API_KEY[-24:],
        "Bearer": "Bearer",
        "prompt": PROMPT[:24],
        "system prompt": SYSTEM,
    }
    return [name for name, needle in needles.items() if needle in output]


def _assert_one_real_call(fake_api: FakeMessagesAPI) -> None:
    # The scan means something only if the secrets went on the wire from the subprocess.
    [request] = fake_api.requests
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert PROMPT.encode() in request.body and SYSTEM.encode() in request.body


@pytest.mark.slow  # a host process
@pytest.mark.parametrize("mode", ["env", "host-debug", "sdk-first", "child-debug"])
def test_library_debug_logging_shows_no_key_header_or_prompt(
    mode: str, fake_api: FakeMessagesAPI, policy_dir: Path, tmp_path: Path
) -> None:
    """``Gateway(...)`` in a host with ANTHROPIC_LOG=debug or a DEBUG root logger."""
    env = {"ANTHROPIC_LOG": "debug"} if mode == "env" else {}
    code, output = _run(
        [str(PYTHON), "-c", LIBRARY_HOST, mode, str(policy_dir),
         f"sqlite:///{tmp_path / 'audit.db'}", fake_api.base_url, API_KEY, PROMPT],
        env,
    )  # fmt: skip
    assert code == 0, output
    _assert_one_real_call(fake_api)
    if mode != "env":  # the host's DEBUG logging reached stderr: the scan could see a leak
        assert HOST_MARK in output
    assert _leaks(output) == [], output


@pytest.mark.slow  # the CLI as a process
def test_cli_with_anthropic_log_debug_shows_no_key_header_or_prompt(
    fake_api: FakeMessagesAPI, policy_dir: Path, tmp_path: Path
) -> None:
    """``gateway ask`` with ANTHROPIC_LOG=debug (the CLI calls configure_logging)."""
    env = {
        "ANTHROPIC_LOG": "debug",
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": fake_api.base_url,
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        "GATEWAY_DURABILITY": "os",
    }
    code, output = _run([str(PYTHON), "-m", "gateway", "ask", "compliance_review", PROMPT], env)
    assert code == 0, output
    _assert_one_real_call(fake_api)
    assert _leaks(output) == [], output


# -- the guard, in process --------------------------------------------------------------------

SDK_CHILD = "anthropic._base_client"


@pytest.fixture
def sdk_logging() -> Iterator[None]:
    """The SDK loggers' levels and filters, and the root's level, as they were."""
    loggers = [logging.getLogger(name) for name in (*SDK_LOGGERS, SDK_CHILD)]
    saved = [(logger, logger.level, list(logger.filters)) for logger in loggers]
    yield
    for logger, level, filters in saved:
        logger.setLevel(level)
        logger.filters[:] = filters


@pytest.mark.usefixtures("sdk_logging")
def test_a_child_logger_set_to_debug_still_logs_nothing_below_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger=SDK_CHILD)
    hold_sdk_loggers()
    logging.getLogger(SDK_CHILD).debug("Request options: %s", {"headers": {"x": API_KEY}})
    logging.getLogger(SDK_CHILD).info("HTTP Request: POST %s", "/v1/messages")
    assert caplog.records == []


@pytest.mark.usefixtures("sdk_logging")
def test_the_sdks_warnings_reach_the_host_with_the_key_withheld(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    guard = SdkLogGuard(secrets=(API_KEY,)).attach()
    log = logging.getLogger(SDK_CHILD)
    log.warning("retrying with key %s", API_KEY)
    log.warning("header Authorization: Bearer sk-other-token-123")  # shaped like a credential
    log.warning("%s and %s", API_KEY)  # a broken format: handlers would print the args raw
    try:
        raise RuntimeError(f"upstream echoed {API_KEY}")
    except RuntimeError:
        log.exception("request failed")
    log.error("plain error, nothing secret")
    text = caplog.text
    assert [r.levelno for r in caplog.records] == [logging.WARNING] * 3 + [logging.ERROR] * 2
    assert API_KEY not in text and API_KEY[-24:] not in text
    assert "Bearer" not in text and "sk-other-token" not in text
    assert text.count(WITHHELD) == 4
    assert "request failed" in text and "RuntimeError" in text
    assert "plain error, nothing secret" in text
    guard.detach()
    assert guard not in log.filters


@pytest.mark.usefixtures("sdk_logging")
def test_holding_raises_the_sdk_loggers_to_warning_but_never_lowers_them() -> None:
    logging.getLogger("anthropic").setLevel(logging.DEBUG)
    logging.getLogger("httpx2").setLevel(logging.ERROR)
    hold_sdk_loggers()
    assert logging.getLogger("anthropic").level == logging.WARNING
    assert logging.getLogger("httpx2").level == logging.ERROR
    assert logging.getLogger("httpcore2").level == logging.WARNING
