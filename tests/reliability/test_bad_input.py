"""Scenario 5: bad input through the Python API and the CLI.

Guarantee: arbitrary text, wrong types, huge or non-finite overrides, damaged policy files and
database URLs that point nowhere end in a typed ``GatewayError`` (API) or one ``error:`` line
with exit code 1-4 (CLI) - never a traceback or exit 70, never a partial event (every request
in the log has an outcome), and verify passes afterwards.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway import (
    AuditUnavailable,
    ConfigurationError,
    Gateway,
    GatewayError,
    InputError,
    PolicyLoadError,
    Settings,
)
from gateway.cli import main
from tests.fakes.messages_api import FakeMessagesAPI
from tests.reliability.helpers import copy_policies, log_state

FIXTURE_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
# Any code point, lone surrogates included (they cannot be encoded as UTF-8 on the wire).
TEXT = st.text(st.characters(exclude_categories=[]), max_size=300)
JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
OVERRIDE_KEYS = st.sampled_from(["max_tokens", "temperature", "top_k", "effort", "stream", "x"])


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'audit.db'}"


@pytest.fixture
def gw(fake_api: FakeMessagesAPI, policy_dir: Path, db_url: str) -> Iterator[Gateway]:
    settings_ = Settings(
        policy_dir=policy_dir,
        database_url=db_url,
        anthropic_api_key="sk-ant-bad-input",
        default_caller="tests",
        anthropic_base_url=fake_api.base_url,
        durability="os",
    )
    with Gateway(settings_) as gateway:
        yield gateway


def _no_partial_events(url: str) -> int:
    state = log_state(url)
    assert state.verified, state.defects
    half_done = {r: s for r, s in state.statuses.items() if s == "incomplete"}
    assert not half_done
    return len(state.statuses)


def _call(gw: Gateway, **kwargs: Any) -> str:
    try:
        gw.complete(**kwargs)
    except GatewayError as exc:
        return type(exc).__name__
    return "ok"


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE_HEALTH)
@given(
    task=st.sampled_from(["compliance_review", "quant_strategy", "offline_demo", "nope"]) | TEXT,
    prompt=TEXT,
    caller=st.none() | TEXT,
    overrides=st.none() | st.dictionaries(OVERRIDE_KEYS | TEXT, JSONISH, max_size=3),
)
def test_api_answers_or_raises_a_typed_error(
    gw: Gateway, db_url: str, task: str, prompt: str, caller: str | None, overrides: Any
) -> None:
    """Arbitrary unicode, control characters, NaN/huge/negative overrides: typed or answered."""
    _call(gw, task=task, prompt=prompt, caller=caller, overrides=overrides)
    _no_partial_events(db_url)


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_HEALTH)
@given(prompt=st.none() | JSONISH, messages=st.none() | JSONISH)
def test_api_wrong_types_raise_typed_errors(
    gw: Gateway, db_url: str, prompt: Any, messages: Any
) -> None:
    """Any JSON-ish value as prompt and messages: an answer or a typed error."""
    _call(gw, task="compliance_review", prompt=prompt, messages=messages)
    _no_partial_events(db_url)


def test_api_input_edges_are_refused_and_recorded_whole(
    gw: Gateway, fake_api: FakeMessagesAPI, db_url: str
) -> None:
    """Empty, oversized and mistyped inputs: InputError/PolicyError, nothing sent upstream."""
    cases: list[dict[str, Any]] = [
        {"prompt": "x" * 10_000_000},  # 10 MB
        {"messages": []},
        {"prompt": 123},
        {"messages": "text"},
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "robot", "content": "hi"}]},
        {"prompt": "a", "messages": [{"role": "user", "content": "b"}]},
        {"prompt": "a", "caller": ""},
        {"prompt": "a", "caller": "c" * 10_000},
        {"prompt": "a", "overrides": {"max_tokens": math.nan}},
        {"prompt": "a", "overrides": {"max_tokens": math.inf}},
        {"prompt": "a", "overrides": {"max_tokens": 10**30}},
        {"prompt": "a", "overrides": {"max_tokens": -1}},
        {"prompt": "a", "overrides": {"max_tokens": True}},
        {"prompt": "a", "overrides": {"temperature": 0.5}},  # not allowed by the policy
        {"prompt": "a", "overrides": [("max_tokens", 300)]},
    ]
    for case in cases:
        with pytest.raises(GatewayError):
            gw.complete("compliance_review", **case)
    assert fake_api.requests == []
    assert _no_partial_events(db_url) == len(cases)  # each refusal is one whole REJECTED record


def test_lone_surrogate_in_prompt_is_an_input_error(gw: Gateway, db_url: str) -> None:
    """A prompt with an unpaired surrogate cannot be sent as UTF-8: an InputError, recorded."""
    with pytest.raises(InputError):
        gw.complete("compliance_review", "abc \ud800 def")
    _no_partial_events(db_url)


def test_lone_surrogate_in_caller_is_an_input_error(gw: Gateway, db_url: str) -> None:
    """A caller label with an unpaired surrogate: an InputError, not a pydantic error."""
    with pytest.raises(InputError):
        gw.complete("compliance_review", "abc", caller="svc-\udc00")
    _no_partial_events(db_url)


# -- damaged policy files -------------------------------------------------------------------

DAMAGE: dict[str, bytes | None] = {  # None: derived from the shipped file
    "empty": b"",
    "binary": bytes(range(256)),
    "not utf-8": b'schema = 1\ndescription = "\xff\xfe"\n',
    "truncated": b'schema = 1\ndescription = "half',
    "unknown key": None,
    "wrong type": None,
    "missing prompt file": None,
    "future schema": None,
}


def _damaged(original: bytes, name: str) -> bytes:
    fixed = DAMAGE.get(name)
    if fixed is not None:
        return fixed
    text = original.decode()
    if name == "unknown key":
        return (text + "\nsurprise = true\n").encode()
    if name == "wrong type":
        return text.replace("max_tokens = 2048", 'max_tokens = "2048"').encode()
    if name == "missing prompt file":
        return text.replace("compliance_review.md", "nowhere.md").encode()
    return text.replace("schema = 1", "schema = 99").encode()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_policy_is_a_policy_load_error_and_one_cli_line(
    damage: str, policy_dir: Path, db_url: str, fake_api: FakeMessagesAPI
) -> None:
    """Each kind of damage: PolicyLoadError for that task (others still work), one CLI line."""
    target = policy_dir / "compliance_review.toml"
    target.write_bytes(_damaged(target.read_bytes(), damage))
    with Gateway(
        policy_dir=policy_dir,
        database_url=db_url,
        anthropic_api_key="sk-ant-x",
        default_caller="tests",
        base_url=fake_api.base_url,
    ) as gw:
        with pytest.raises(PolicyLoadError):
            gw.complete("compliance_review", "hello")
        gw.complete("quant_strategy", "the undamaged policies still serve")
    assert len(fake_api.requests) == 1
    result = _cli(["ask", "compliance_review", "hello"], policy_dir, db_url, fake_api)
    _one_error_line(result, {2})


@settings(max_examples=30, deadline=None, suppress_health_check=FIXTURE_HEALTH)
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 4))
def test_randomly_damaged_policy_loads_or_is_refused(
    seed: int, edits: int, tmp_path: Path, db_url: str
) -> None:
    """Random byte edits (flip, cut, insert) to a policy: an answer or a typed error."""
    rng = random.Random(seed)
    folder = copy_policies(Path(tempfile.mkdtemp(dir=tmp_path)) / "policies")
    target = folder / "compliance_review.toml"
    data = bytearray(target.read_bytes())
    for _ in range(edits):
        at = rng.randrange(len(data))
        action = rng.randrange(3)
        if action == 0:
            data[at] = rng.randrange(256)
        elif action == 1:
            del data[at : at + rng.randrange(1, 20)]
        else:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    target.write_bytes(bytes(data))
    with Gateway(policy_dir=folder, database_url=db_url, offline=True) as gw:
        _call(gw, task="compliance_review", prompt="hello")  # offline: no upstream needed
    _no_partial_events(db_url)


# -- database URLs that point nowhere -------------------------------------------------------

NOWHERE = [
    "sqlite:////no/such/folder/audit.db",
    "sqlite://",
    "sqlite:///:memory:",
    "postgresql+psycopg://nobody@127.0.0.1:1/audit",
    "mysql://u@127.0.0.1/x",
    "not a url at all",
    "sqlite:///{tmp}/audit.db?lock_timeout=soon",
    "sqlite:///{tmp}/audit.db?lock_timeout=nan",
    "sqlite:///{tmp}/not-a-database.db",
]


@pytest.mark.parametrize("url", NOWHERE)
def test_database_url_pointing_nowhere_is_one_clear_error(
    url: str, tmp_path: Path, policy_dir: Path, fake_api: FakeMessagesAPI
) -> None:
    """A URL that cannot be an audit database: AuditUnavailable/ConfigurationError, exit 2/4."""
    url = url.format(tmp=tmp_path)
    (tmp_path / "not-a-database.db").write_bytes(b"this is not SQLite" * 100)
    with pytest.raises((AuditUnavailable, ConfigurationError)):
        Gateway(policy_dir=policy_dir, database_url=url, anthropic_api_key="sk-ant-x")
    _one_error_line(_cli(["ask", "compliance_review", "hi"], policy_dir, url, fake_api), {2, 4})
    _one_error_line(_cli(["audit", "verify"], policy_dir, url, fake_api), {2, 4})
    assert fake_api.requests == []


# -- the CLI --------------------------------------------------------------------------------


def _cli(args: list[str], policy_dir: Path, url: str, fake: FakeMessagesAPI, **kw: Any) -> Result:
    env = {
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "GATEWAY_DATABASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-bad-input",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "GATEWAY_DURABILITY": "os",
    }
    return CliRunner().invoke(main, args, env=env, **kw)


def _one_error_line(result: Result, codes: set[int]) -> None:
    assert result.exit_code in codes, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines


OVERRIDE_TEXT = st.sampled_from(
    ["max_tokens=NaN", "max_tokens=-1", "max_tokens=1e400", "max_tokens=99999999999999999999",
     "max_tokens=[1]", "temperature=0.5", "=3", "noequals", "max_tokens=", "max_tokens=512"]
)  # fmt: skip


@settings(max_examples=30, deadline=None, suppress_health_check=FIXTURE_HEALTH)
@given(prompt=TEXT, overrides=st.lists(OVERRIDE_TEXT, max_size=2), caller=st.none() | TEXT)
def test_cli_ask_gives_an_answer_or_one_error_line(
    prompt: str,
    overrides: list[str],
    caller: str | None,
    policy_dir: Path,
    db_url: str,
    fake_api: FakeMessagesAPI,
) -> None:
    """`gateway ask` with arbitrary stdin text, overrides and caller: exit 0, or one line."""
    args = ["ask", "compliance_review"]
    for item in overrides:
        args += ["--override", item]
    if caller is not None:
        args += ["--caller", caller]
    result = _cli(args, policy_dir, db_url, fake_api, input=prompt.encode("utf-8", "surrogatepass"))
    if result.exit_code != 0:
        _one_error_line(result, {1, 2, 3, 4})


@pytest.mark.parametrize("data", [b"\xed\xa0\x80", b"caf\xe9", b"\xff\xfe"])
def test_cli_ask_with_stdin_that_is_not_utf8_is_one_error_line(
    data: bytes, policy_dir: Path, db_url: str, fake_api: FakeMessagesAPI
) -> None:
    """A lone surrogate's bytes, Latin-1 text, a UTF-16 mark: exit 2, one line, nothing sent
    (an internal error, exit 70, before; found by the property test above)."""
    result = _cli(["ask", "compliance_review"], policy_dir, db_url, fake_api, input=data)
    _one_error_line(result, {2})
    assert "not UTF-8" in result.stderr
    assert fake_api.requests == []


def test_cli_ten_megabyte_prompt_is_one_line(
    policy_dir: Path, db_url: str, fake_api: FakeMessagesAPI
) -> None:
    """10 MB on stdin: one error line, exit 2, nothing sent upstream, the refusal recorded."""
    result = _cli(["ask", "compliance_review"], policy_dir, db_url, fake_api, input="y" * 10**7)
    _one_error_line(result, {2})
    assert fake_api.requests == []
    assert _no_partial_events(db_url) == 1


def test_log_is_sound_after_the_generated_runs(gw: Gateway, db_url: str) -> None:
    """The store that took generated input still verifies and holds no half-done request."""
    for text in ["\x00", "\u202e", "\U0001f600" * 50, "\r\n\t\x1b[31m"]:
        _call(gw, task="compliance_review", prompt=text)
    _no_partial_events(db_url)
