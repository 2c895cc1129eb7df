"""/metrics: Prometheus figures summed over `gateway serve`'s workers, behind their own token.

A real two-worker server, mixed requests from the official SDK (answered, replayed from the
record, streamed, refused, failed upstream), and scrapes parsed with Prometheus' own text
parser. Before this the server had no metrics at all.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx2 as httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import gateway.errors
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ROOT, ServerProcess, running_server, server_env

pytestmark = pytest.mark.slow  # `gateway serve` as a process, with two workers

TOKEN = "metrics-token-for-the-scraper-only"
_numbers = itertools.count()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("metrics")
    running = ServerProcess(
        home, server_env(home, fake.base_url, GATEWAY_SERVER_METRICS_TOKEN=TOKEN)
    )
    running.cli("db", "upgrade")
    # Two workers each import the whole stack: on a loaded machine that takes a while.
    running.start("--workers", "2", ready_within=120)
    try:
        yield running
    finally:
        running.stop()


def scrape(server: ServerProcess) -> list[Sample]:
    answer = httpx.get(
        f"{server.base_url}/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    families = text_string_to_metric_families(answer.text)
    return [sample for family in families for sample in family.samples]


def total(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_mixed_requests_are_counted_over_both_workers(
    server: ServerProcess, fake: FakeMessagesAPI
) -> None:
    key = server.create_key("payments-svc")
    client = anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)
    before = scrape(server)
    prompt = f"Transaction {next(_numbers)}: EUR 9,500 cash deposit."
    # compliance_review replays recorded answers: the second of these is served from the log.
    answers = 6
    for _ in range(answers):
        client.messages.create(
            model="compliance_review",
            max_tokens=256,
            messages=[{"role": "user", "content": prompt}],
        )
    with client.messages.stream(
        model="general_assistant",
        max_tokens=64,
        messages=[{"role": "user", "content": f"Summarise policy {next(_numbers)}."}],
    ) as stream:
        stream.get_final_text()
    fake.script(Reply.error(400, message="bad field"))
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(
            model="general_assistant",
            max_tokens=64,
            messages=[{"role": "user", "content": f"Question {next(_numbers)}."}],
        )
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(
            base_url=server.base_url, api_key="gwk_wrong", max_retries=0
        ).models.list()

    after = scrape(server)

    def added(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    route = "/v1/messages"
    assert added("gateway_requests_total", route=route, task="compliance_review", status="200",
                 cached="false") == 1  # fmt: skip
    assert added("gateway_requests_total", route=route, task="compliance_review", status="200",
                 cached="true") == answers - 1  # fmt: skip
    assert added("gateway_requests_total", route=route, task="general_assistant",
                 status="200") == 1  # fmt: skip
    assert added("gateway_requests_total", route=route, task="general_assistant",
                 status="400") == 1  # fmt: skip
    assert added("gateway_requests_total", route="/v1/models", task="other", status="401") == 1
    assert added("gateway_request_duration_seconds_count", route=route) == answers + 2
    # Upstream: two answers from the model (the first compliance_review, the stream), one
    # failure of kind invalid_request_error.
    assert added("gateway_upstream_duration_seconds_count") == 2
    assert added("gateway_upstream_duration_seconds_count", task="compliance_review") == 1
    assert added("gateway_upstream_failures_total", task="general_assistant",
                 kind="invalid_request_error") == 1  # fmt: skip
    assert added("gateway_errors_total", error="UpstreamRejected") == 1
    # Each scrape is summed over both workers' files, whichever worker answers it; nothing is
    # in progress now but the scrape itself, and no stream is open.
    assert total(after, "gateway_requests_in_progress") == 1
    assert total(after, "gateway_open_streams") == 0
    assert total(after, "gateway_open_connections") >= 1


def test_no_caller_key_or_content_is_in_a_label(server: ServerProcess) -> None:
    key = server.create_key("desk-7")
    secret_task = "a-task-nobody-loaded-" + "x" * 300
    client = anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)
    with pytest.raises(anthropic.APIStatusError):
        client.messages.create(
            model=secret_task,
            max_tokens=16,
            messages=[{"role": "user", "content": "IBAN DE89 3704 0044 0532 0130 00"}],
        )
    text = httpx.get(
        f"{server.base_url}/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10
    ).text
    for leaked in (key, "desk-7", "payments-svc", secret_task, "DE89", "/v1/models/"):
        assert leaked not in text
    samples = scrape(server)
    labels = {v for s in samples for k, v in s.labels.items() if k == "task"}
    assert labels <= {"other"} | _shipped_tasks(server)
    errors = {s.labels["error"] for s in samples if s.name == "gateway_errors_total"}
    assert errors <= set(dir(gateway.errors))  # class names only


def test_the_sample_alert_rules_name_metrics_the_server_exports(
    server: ServerProcess, fake: FakeMessagesAPI
) -> None:
    # Every series the rules name exists once something happened: an upstream failure, say.
    client = anthropic.Anthropic(
        base_url=server.base_url, api_key=server.create_key("desk"), max_retries=0
    )
    fake.script(Reply.error(400, message="bad field"))
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(
            model="general_assistant",
            max_tokens=16,
            messages=[{"role": "user", "content": f"Question {next(_numbers)}."}],
        )
    rules = (ROOT / "docs" / "examples" / "prometheus-alerts.yml").read_text()
    named = set(re.findall(r"\b(gateway_[a-z_]+)", rules))
    exported = {s.name for s in scrape(server)}
    assert named and named <= exported, named - exported


def _shipped_tasks(server: ServerProcess) -> set[str]:
    return {p.stem for p in (server.home / "policies").glob("*.toml")}


def test_a_scrape_needs_the_metrics_token_not_a_caller_key(server: ServerProcess) -> None:
    key = server.create_key("payments-svc")
    for headers in ({}, {"authorization": f"Bearer {key}"}, {"x-api-key": TOKEN}):
        answer = httpx.get(f"{server.base_url}/metrics", headers=headers, timeout=10)
        assert answer.status_code == 401
        assert answer.json()["error"]["type"] == "authentication_error"


def test_without_a_token_there_is_no_metrics_route(tmp_path: Path, fake: FakeMessagesAPI) -> None:
    with running_server(tmp_path, fake) as plain:
        answer = httpx.get(
            f"{plain.base_url}/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10
        )
    assert answer.status_code == 404
