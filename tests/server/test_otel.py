"""OpenTelemetry spans from `gateway serve --otel` (a real process, two workers), exported by
OpenTelemetry's console exporter to the server's stdout, a file here: one span per Messages
request with the GenAI attributes and the gateway's ids, never the prompt, the answer or a
key. Without the OpenTelemetry SDK, ``--otel`` is a one-line error."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2 as httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ROOT, ServerProcess, free_port, server_env

pytestmark = pytest.mark.slow  # `gateway serve` as a process

PROMPT_TEXT = "Transaction: 991 EUR to Tyrell, prompt-text-marker"
ANSWER_TEXT = "answer-text-marker <verdict>clear</verdict>"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@dataclass(frozen=True)
class Traced:
    spans_path: Path
    answers: dict[str, tuple[str, int | None]]  # what was asked -> (request id, audit seq)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    home = tmp_path_factory.mktemp("otel")
    with FakeMessagesAPI() as fake:
        env = server_env(
            home, fake.base_url, OTEL_TRACES_EXPORTER="console", GATEWAY_SERVER_SEQ_HEADER="1"
        )
        server = ServerProcess(home, env, stdout_path=home / "spans.jsonl")
        server.cli("db", "upgrade")
        key = server.create_key("payments-svc")
        server.start("--otel", "--workers", "2")
        try:
            answers = exercise(server, key, fake)
        finally:
            server.stop()  # each worker flushes its spans on the way out
        yield Traced(home / "spans.jsonl", answers)


def exercise(
    server: ServerProcess, key: str, fake: FakeMessagesAPI
) -> dict[str, tuple[str, int | None]]:
    client = anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)
    fake.script(Reply.ok(text=ANSWER_TEXT))
    plain = client.messages.with_raw_response.create(
        model="compliance_review",
        max_tokens=512,
        messages=[{"role": "user", "content": PROMPT_TEXT}],
        extra_headers={"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"},
    )
    answers: dict[str, tuple[str, int | None]] = {
        "plain": (plain.headers["request-id"], int(plain.headers["x-gateway-seq"]))
    }
    fake.script(Reply.stream(ANSWER_TEXT, stop_sequence="</reasons>"))
    with client.messages.stream(
        model="compliance_review",
        max_tokens=512,
        messages=[{"role": "user", "content": PROMPT_TEXT + " streamed"}],
    ) as stream:
        final = stream.get_final_message()
        assert final.id == stream.response.headers["request-id"]  # the audit record's id
    answers["stream"] = (final.id, None)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(
            model="compliance_review",
            max_tokens=512,
            system="system-text-marker",
            messages=[{"role": "user", "content": PROMPT_TEXT}],
        )
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="no_such_task", max_tokens=512, messages=[])
    assert httpx.get(f"{server.base_url}/v1/models", headers={"x-api-key": key}).is_success
    return answers


def spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_one_span_per_messages_request_with_the_genai_attributes(traced: Traced) -> None:
    found = spans(traced.spans_path)
    assert len(found) == 4  # plain, streamed, refused, unknown task; /v1/models has none
    by_request = {s["attributes"].get("gateway.request_id"): s for s in found}
    plain_id, plain_seq = traced.answers["plain"]
    assert plain_seq is not None
    plain = by_request[plain_id]
    assert plain["name"] == "chat claude-sonnet-4-6"
    assert plain["kind"] == "SpanKind.CLIENT"
    attrs = plain["attributes"]
    assert {k: v for k, v in attrs.items() if not k.startswith("gen_ai.usage")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-6",
        "gen_ai.response.model": "claude-sonnet-4-6",
        "gen_ai.response.finish_reasons": ["end_turn"],
        "gateway.task": "compliance_review",
        "gateway.caller": "payments-svc",
        "gateway.key_id": attrs["gateway.key_id"],
        "gateway.request_id": plain_id,
        "gateway.audit.seq": plain_seq,
        "gateway.cached": False,
        "http.response.status_code": 200,
    }
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    assert attrs["gateway.key_id"].startswith("key_")
    # The caller's traceparent makes the span a child of the caller's trace.
    assert plain["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert plain["parent_id"] == f"0x{CALLER_SPAN}"
    assert plain["resource"]["attributes"]["service.name"] == "compliance-gateway"

    streamed = by_request[traced.answers["stream"][0]]["attributes"]
    assert streamed["gen_ai.response.finish_reasons"] == ["stop_sequence"]
    assert streamed["gateway.audit.seq"] > plain_seq
    assert streamed["gen_ai.usage.output_tokens"] > 0

    refused = [s for s in found if s["attributes"]["http.response.status_code"] == 400]
    assert [s["status"]["status_code"] for s in refused] == ["ERROR"]
    assert refused[0]["attributes"]["error.type"] == "invalid_request_error"
    unknown = [s for s in found if s["attributes"]["http.response.status_code"] == 404]
    assert unknown[0]["attributes"]["gateway.task"] == "no_such_task"
    assert "gen_ai.request.model" not in unknown[0]["attributes"]
    assert unknown[0]["name"] == "chat"


def test_spans_carry_no_prompt_answer_system_text_or_key(traced: Traced) -> None:
    text = traced.spans_path.read_text()
    assert text.count("gen_ai.operation.name") == 4
    for marker in ("prompt-text-marker", "answer-text-marker", "system-text-marker", "gwk_"):
        assert marker not in text
    assert "sk-ant-" not in text


def _shadowed_otel(folder: Path) -> str:
    """A folder that, first on the path, makes ``opentelemetry`` fail to import."""
    package = folder / "opentelemetry"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('opentelemetry is not installed')\n")
    return f"{folder}:{ROOT}"


@pytest.mark.parametrize(("flag", "env"), [(["--otel"], {}), ([], {"GATEWAY_OTEL": "1"})])
def test_without_the_sdk_otel_is_a_one_line_error(
    tmp_path: Path, flag: list[str], env: dict[str, str]
) -> None:
    environ = server_env(tmp_path, "http://127.0.0.1:9", **env)
    environ["PYTHONPATH"] = _shadowed_otel(tmp_path / "shadow")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), *flag],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "compliance-gateway[otel]" in lines[0]


@pytest.mark.parametrize(
    ("exporter", "said"),
    [("zipkin-json", "'zipkin-json'"), ("otlp", "opentelemetry-exporter-otlp")],
)
def test_an_unusable_exporter_is_a_one_line_error_before_serving(
    tmp_path: Path, exporter: str, said: str
) -> None:
    environ = server_env(tmp_path, "http://127.0.0.1:9", OTEL_TRACES_EXPORTER=exporter)
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), "--otel"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert said in lines[0]
