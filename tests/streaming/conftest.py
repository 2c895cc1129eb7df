"""Fixtures for the streaming tests: gateways (sync and async) on the loopback fake, and
helpers that read a request's events back and check the whole log."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore, StoredEvent
from audit.verify import verify_log
from gateway import AsyncGateway, Gateway, Settings
from tests.fakes.messages_api import FakeMessagesAPI

SHIPPED = Path(__file__).resolve().parents[2] / "policies"
API_KEY = "sk-ant-test-STREAM-4b1d9e-DO-NOT-LEAK"
TERMINAL = {"response", "failed", "cancelled"}

# A policy in record mode on a current model (every stream goes upstream), and one that
# must stream, with a max_tokens only a stream may ask for.
STREAM_POLICY = """\
schema = 1
description = "A streamed chat answer."
owner = "tests"

[model]
id = "claude-opus-5-5"

[generation]
max_tokens = 1024

[output]
stream = "{stream}"

[cache]
mode = "{mode}"
"""


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    target = tmp_path / "policies"
    shutil.copytree(SHIPPED, target)
    for name, stream, mode in (
        ("chat", "may", "record"),
        ("chat_replay", "may", "replay"),
        ("chat_must", "must", "record"),
        ("chat_never", "never", "record"),
    ):
        (target / f"{name}.toml").write_text(STREAM_POLICY.format(stream=stream, mode=mode))
    return target


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.db"


@pytest.fixture
def settings(policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI) -> Settings:
    return Settings(
        policy_dir=policy_dir,
        database_url=f"sqlite:///{db_path}",
        anthropic_api_key=API_KEY,
        anthropic_base_url=fake_api.base_url,
        durability="os",
        retry_backoff_base_s=0.01,
        default_caller="tests",
    )


@pytest.fixture
def gw(settings: Settings) -> Iterator[Gateway]:
    with Gateway(settings) as gateway:
        yield gateway


MakeAsync = Callable[[], AsyncGateway]


@pytest.fixture
def make_async(settings: Settings) -> MakeAsync:
    """AsyncGateway is built inside the test's event loop (asyncio.run), so it is a factory."""
    return lambda: AsyncGateway(settings)


def events(db_path: Path, request_id: str | None = None) -> list[StoredEvent]:
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        return [e for e in store.iter_events() if request_id in (None, e.request_id)]


def kinds(db_path: Path, request_id: str) -> list[str]:
    return [str(e.kind) for e in events(db_path, request_id)]


def terminal(db_path: Path, request_id: str) -> StoredEvent:
    """The request's one terminal event (asserting there is exactly one)."""
    ends = [e for e in events(db_path, request_id) if str(e.kind) in TERMINAL]
    assert len(ends) == 1, [str(e.kind) for e in events(db_path, request_id)]
    return ends[0]


def payload(db_path: Path, event: StoredEvent, name: str) -> bytes:
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        return store.payload(event.payload_digests[name])


def partial_text(db_path: Path, event: StoredEvent) -> str:
    """The text a FAILED or CANCELLED stream had delivered (its ``partial_response``
    payload: the event's body holds its size only)."""
    if "partial_response" not in event.payload_digests:
        return ""
    message = json.loads(payload(db_path, event, "partial_response"))
    text = "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
    assert event.data["partial"]["text_chars"] == len(text)
    return text


def verified(db_path: Path) -> None:
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        report = verify_log(store)
    assert report.ok, report


def text_of(stream_events: list[dict[str, Any]]) -> str:
    return "".join(
        e["delta"]["text"]
        for e in stream_events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    )
