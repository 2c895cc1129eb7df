"""A provider that sends without handing the gateway its bytes first (``on_wire``) gets no
answer through: the request went out unrecorded, so the call fails closed with the gateway's
own one-line error, and nothing is recorded as its outcome. An explicit check, so it holds
under ``python -O`` too (an ``assert`` would vanish there)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore, EventKind
from gateway.errors import ConfigurationError
from gateway.providers.base import OnAttemptFailed, OnWire, ProviderReply, StreamItem
from gateway.providers.local import LocalProvider
from gateway.request import CallLabels, Intended, Intent, Recorder, arecord_stream, record_stream

ROOT = Path(__file__).resolve().parents[2]
BODY: dict[str, Any] = {
    "model": "local:ngram",
    "max_tokens": 8,
    "messages": [{"role": "user", "content": "The reviewer reads the"}],
}


class SkipsOnWire(LocalProvider):
    """The local model, answering without ever calling ``on_wire`` (a provider bug)."""

    def send(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | None = None,
    ) -> ProviderReply:
        return super().send(body, api_version=api_version, on_attempt_failed=on_attempt_failed)

    async def asend(self, body: Mapping[str, Any], **options: Any) -> ProviderReply:
        options.pop("on_wire", None)
        return await super().asend(body, **options)

    def stream(self, body: Mapping[str, Any], **options: Any) -> Iterator[StreamItem]:
        options.pop("on_wire", None)
        return super().stream(body, **options)

    def astream(self, body: Mapping[str, Any], **options: Any) -> AsyncIterator[StreamItem]:
        options.pop("on_wire", None)
        return super().astream(body, **options)

    def count_tokens(
        self, body: Mapping[str, Any], *, api_version: str, on_wire: OnWire | None = None
    ) -> int:
        return super().count_tokens(body, api_version=api_version)


class Outcomes:
    """A stream's terminal outcomes, noted (none may be recorded for an unrecorded send)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def completed(self, reply: ProviderReply) -> None:
        self.seen.append("completed")

    def failed(self, sent: object, partial: object) -> None:
        self.seen.append("failed")

    def cancelled(self, partial: object, reason: str) -> None:
        self.seen.append(f"cancelled:{reason}")


def _labels() -> CallLabels:
    return CallLabels(
        request_id="req_unannounced",
        task="offline_demo",
        caller="tests",
        policy_fingerprint=None,
        request_hash="sha256:" + "0" * 64,
    )


def _intended() -> Intended:
    return Intended(Intent(EventKind.REQUEST, {"provider": "local"}))


def _kinds(store: AuditStore) -> list[str]:
    return [str(e.kind) for e in store.iter_events()]


@pytest.mark.parametrize("mode", ["send", "asend", "stream", "astream"])
def test_an_answer_to_a_request_never_announced_is_refused(tmp_path: Path, mode: str) -> None:
    store = AuditStore.open(f"sqlite:///{tmp_path / 'audit.db'}", durability="os")
    recorder = Recorder(store)
    provider = SkipsOnWire()
    outcomes = Outcomes()
    options: dict[str, Any] = {"api_version": "local-1", "intended": _intended()}
    try:
        with pytest.raises(ConfigurationError, match="without handing its bytes") as raised:
            if mode == "send":
                recorder.call(_labels(), provider, BODY, **options)
            elif mode == "stream":
                for _event in record_stream(
                    recorder,
                    _labels(),
                    provider,
                    {**BODY, "stream": True},
                    outcomes=outcomes,
                    **options,
                ):
                    raise AssertionError("no event of an unrecorded request reaches the caller")
            else:

                async def run() -> None:
                    if mode == "asend":
                        await recorder.acall(_labels(), provider, BODY, **options)
                        return
                    async for _event in arecord_stream(
                        recorder,
                        _labels(),
                        provider,
                        {**BODY, "stream": True},
                        outcomes=outcomes,
                        **options,
                    ):
                        raise AssertionError("no event reaches the caller")

                asyncio.run(run())
        assert raised.value.request_id == "req_unannounced"
        assert "\n" not in str(raised.value)
        assert outcomes.seen == []  # no outcome without its intent
        assert _kinds(store) == []
    finally:
        recorder.threads.close()
        store.close()


@pytest.mark.slow  # python -O as a process
def test_the_refusal_holds_under_python_dash_o(tmp_path: Path) -> None:
    # Under -O an assert is gone: the answer would come back as a call's outcome with no
    # REQUEST before it. The same call, in a child interpreter run with -O.
    script = textwrap.dedent(
        f"""
        import sys
        from audit import AuditStore
        from gateway.request import Recorder
        from gateway.errors import ConfigurationError
        from tests.gateway.test_unannounced_send import BODY, SkipsOnWire, _intended, _labels

        print("optimize:", sys.flags.optimize)
        store = AuditStore.open("sqlite:///{tmp_path / "audit.db"}", durability="os")
        try:
            Recorder(store).call(
                _labels(), SkipsOnWire(), BODY, api_version="local-1", intended=_intended()
            )
        except ConfigurationError as exc:
            print("refused:", exc.message)
        else:
            print("answered")
        finally:
            store.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-O", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "optimize: 1"
    assert lines[1].startswith("refused: the local provider sent the request without"), lines
