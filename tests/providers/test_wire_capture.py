"""The wire capture fails safe: an SDK release that renamed, reshaped or broke a private step
gets the SDK's public path, with the same bytes; when no path can produce them, a typed error.

The stand-in client classes below are what such a release would look like from the capture's
side; each is a real SDK client with one private step changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from gateway.errors import ConfigurationError
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.wire._capture import WireCapture, fast_path_supported
from tests.fakes.messages_api import FakeMessagesAPI

BODIES: dict[str, dict[str, Any]] = {
    "plain": {
        "model": "claude-opus-4-8",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Transaction 4711: clear or hold?"}],
    },
    "sampling fields": {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "system": "You review transactions.",
        "messages": [{"role": "user", "content": "wire 9,800 EUR to DE89 3704 0044"}],
        "temperature": 0.0,
        "top_p": 0.9,
        "top_k": 5,
        "stop_sequences": ["</verdict>"],
    },
    "system blocks": {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "system": [
            {"type": "text", "text": "You review transactions."},
            {"type": "text", "text": "Answer in JSON.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Grüße ☃ \u2028"}]},
            {"role": "assistant", "content": "{"},
        ],
        "metadata": {"user_id": "payments-svc"},
    },
    "stream": {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64_000,
        "messages": [{"role": "user", "content": "long answer"}],
        "stream": True,
        "temperature": 1.0,
    },
    "tools and unknown fields": {
        "model": "claude-opus-4-8",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "look it up"}],
        "tools": [
            {"name": "lookup", "input_schema": {"type": "object", "properties": {}}},
        ],
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
        "future_field": {"b": 1, "a": [1.0, 2, None]},
    },
}


class _Removed:
    """A method a release renamed: reading it raises AttributeError, as a missing one does."""

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        raise AttributeError("renamed in this release")


class SDKWithRenamedStep(anthropic.Anthropic):
    """``_copy_and_prepare`` is now ``_prepare_copy``; the SDK's own request() follows."""

    _copy_and_prepare = _Removed()

    def _prepare_copy(self, options: Any) -> Any:
        return anthropic.Anthropic._copy_and_prepare(self, options)

    def request(self, cast_to: Any, options: Any, **kwargs: Any) -> Any:
        return self._request(cast_to, self._prepare_copy(options), **kwargs)


class SDKWithReshapedStep(anthropic.Anthropic):
    """``_copy_and_prepare`` takes a new required argument; the SDK's own request() passes it."""

    def _copy_and_prepare(self, options: Any, defaults: Any) -> Any:  # type: ignore[override]
        return super()._copy_and_prepare(options)

    def request(self, cast_to: Any, options: Any, **kwargs: Any) -> Any:
        return self._request(cast_to, self._copy_and_prepare(options, {}), **kwargs)


class SDKWithNewStep(anthropic.Anthropic):
    """``_build_request`` needs state that only the SDK's own request() sets up."""

    _attempt_state: object | None = None
    needs_state_for: frozenset[str] = frozenset({"model"})  # every body

    def request(self, cast_to: Any, options: Any, **kwargs: Any) -> Any:
        self._attempt_state = object()
        try:
            return super().request(cast_to, options, **kwargs)
        finally:
            self._attempt_state = None

    def _build_request(self, options: Any, *, retries_taken: int = 0) -> Any:
        body = options.json_data or {}
        if self._attempt_state is None and self.needs_state_for & set(body):
            raise AttributeError("'SDKWithNewStep' object has no attribute '_attempt_state'")
        return super()._build_request(options, retries_taken=retries_taken)


class SDKWithNewStepForTools(SDKWithNewStep):
    """As above, but only for bodies with tools, which the build-time probes do not carry."""

    needs_state_for = frozenset({"tools"})


CHANGED_RELEASES = [SDKWithRenamedStep, SDKWithReshapedStep, SDKWithNewStep]


@pytest.fixture
def fast() -> Iterator[WireCapture]:
    capture = WireCapture()
    yield capture
    capture.close()


def capture_from(sdk_client: type[anthropic.Anthropic]) -> WireCapture:
    return WireCapture(sdk_client)


def test_the_installed_sdk_gets_the_fast_path(fast: WireCapture) -> None:
    assert fast_path_supported(anthropic.Anthropic)
    assert fast.fast
    for body in BODIES.values():
        fast.wire_bytes(body)
    assert fast.fast  # no body knocked it off


@pytest.mark.parametrize("sdk_client", [SDKWithRenamedStep, SDKWithReshapedStep])
def test_a_renamed_or_reshaped_private_step_is_detected(
    sdk_client: type[anthropic.Anthropic],
) -> None:
    assert not fast_path_supported(sdk_client)


def test_a_step_that_fails_when_called_is_caught_by_the_probes() -> None:
    assert fast_path_supported(SDKWithNewStep)  # its signatures look right
    capture = capture_from(SDKWithNewStep)
    try:
        assert not capture.fast
    finally:
        capture.close()


@pytest.mark.parametrize("name", list(BODIES))
@pytest.mark.parametrize("sdk_client", CHANGED_RELEASES, ids=lambda c: c.__name__)
def test_the_public_path_gives_the_fast_paths_bytes(
    sdk_client: type[anthropic.Anthropic], name: str, fast: WireCapture
) -> None:
    fallback = capture_from(sdk_client)
    try:
        assert not fallback.fast
        assert fallback.wire_bytes(BODIES[name]) == fast.wire_bytes(BODIES[name])
    finally:
        fallback.close()


@pytest.mark.parametrize("name", list(BODIES))
def test_the_public_path_gives_the_bytes_that_go_on_the_wire(
    name: str, fake_api: FakeMessagesAPI
) -> None:
    provider = AnthropicProvider(api_key="sk-ant-capture", base_url=fake_api.base_url)
    fallback = capture_from(SDKWithRenamedStep)
    body = BODIES[name]
    try:
        provider.send(body, api_version="2023-06-01", on_attempt_failed=print)
        [seen] = fake_api.requests
        assert seen.json == body
        assert fallback.wire_bytes(body) == seen.body == provider.wire_bytes(body)
    finally:
        fallback.close()
        provider.close()


def test_a_step_that_fails_for_one_body_turns_the_fast_path_off(fast: WireCapture) -> None:
    capture = capture_from(SDKWithNewStepForTools)
    try:
        assert capture.fast  # the probes carry no tools
        assert capture.wire_bytes(BODIES["plain"]) == fast.wire_bytes(BODIES["plain"])
        assert capture.fast
        tools = BODIES["tools and unknown fields"]
        assert capture.wire_bytes(tools) == fast.wire_bytes(tools)  # the public path answered
        assert not capture.fast  # and is used from now on
        for body in BODIES.values():
            assert capture.wire_bytes(body) == fast.wire_bytes(body)
    finally:
        capture.close()


class SDKThatNeverSends(SDKWithRenamedStep):
    """Neither path can capture: create() returns without handing a request to httpx."""

    def request(self, cast_to: Any, options: Any, **kwargs: Any) -> Any:
        return None


class SDKThatBreaks(SDKWithRenamedStep):
    """Neither path can capture: the SDK fails before it builds a request."""

    def request(self, cast_to: Any, options: Any, **kwargs: Any) -> Any:
        raise TypeError(f"unexpected argument in {options.json_data!r}")


@pytest.mark.parametrize(
    ("sdk_client", "cause"),
    [(SDKThatNeverSends, "create() returned without sending"), (SDKThatBreaks, "TypeError")],
)
def test_when_no_path_can_capture_the_error_is_typed_and_names_the_sdk(
    sdk_client: type[anthropic.Anthropic], cause: str
) -> None:
    capture = capture_from(sdk_client)
    try:
        with pytest.raises(ConfigurationError) as caught:
            capture.wire_bytes(BODIES["sampling fields"])
    finally:
        capture.close()
    text = str(caught.value)
    assert f"anthropic SDK {anthropic.__version__}" in text
    assert f"({cause})" in text and "nothing was sent" in text
    assert "\n" not in text
    assert "DE89" not in text  # the body's content is never repeated
    if cause == "TypeError":
        assert isinstance(caught.value.__cause__, TypeError)  # kept for --debug, not shown
