"""The official Python SDK against `gateway serve` (a real process), the fake as upstream:
answers, typed errors, caller identity from the key, and a log that verifies after."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import time

import anthropic
import httpx2 as httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import UPSTREAM_KEY, ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` as a process

PROMPT = [{"role": "user", "content": "Transaction: 42 EUR to ACME"}]
_count = itertools.count()


def fresh() -> list[dict[str, str]]:
    """A prompt not asked before: compliance_review replays recorded answers."""
    return [{"role": "user", "content": f"Transaction: {next(_count)} USD to Initech"}]


@pytest.fixture(scope="module")
def key(server: ServerProcess) -> str:
    return server.create_key("payments-svc")


@pytest.fixture
def client(server: ServerProcess, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def events_of(server: ServerProcess, request_id: str) -> list[tuple[str, str | None]]:
    return [(str(e.kind), e.caller) for e in server.audit_events() if e.request_id == request_id]


def test_a_message_is_answered_through_the_policy_and_recorded_under_the_key_caller(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.ok(text="No finding."))
    raw = client.messages.with_raw_response.create(
        model="compliance_review", max_tokens=1024, messages=PROMPT
    )
    message = raw.parse()
    assert message.content[0].text == "No finding."  # type: ignore[union-attr]
    assert message.model == "claude-sonnet-4-6"  # the policy's model, not the task name
    request_id = raw.headers["request-id"]
    assert message.id == request_id
    assert "x-gateway-seq" not in raw.headers  # off unless GATEWAY_SERVER_SEQ_HEADER is set
    assert events_of(server, request_id) == [
        ("request", "payments-svc"),
        ("response", "payments-svc"),
    ]
    sent = fake.requests[-1]
    assert sent.json is not None and sent.json["model"] == "claude-sonnet-4-6"
    assert sent.json["max_tokens"] == 1024  # the policy opens max_tokens (256..4096)
    assert "system" in sent.json  # the policy's own system prompt
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the gateway's own key


def test_the_task_header_names_the_task_whatever_model_says(
    server: ServerProcess, client: anthropic.Anthropic
) -> None:
    message = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=512,
        messages=PROMPT,
        extra_headers={"x-gateway-task": "compliance_review"},
    )
    assert message.model == "claude-sonnet-4-6"


def test_the_async_client_gets_the_same_answers(server: ServerProcess, key: str) -> None:
    async def run() -> list[str]:
        async with anthropic.AsyncAnthropic(
            base_url=server.base_url, api_key=key, max_retries=0
        ) as client:
            answers = await asyncio.gather(
                *(
                    client.messages.create(
                        model="compliance_review",
                        max_tokens=512,
                        messages=[{"role": "user", "content": f"Transaction: {n}"}],
                    )
                    for n in range(8)
                )
            )
        return [a.id for a in answers]

    ids = asyncio.run(run())
    assert len(set(ids)) == 8
    callers = {e.caller for e in server.audit_events() if e.request_id in ids}
    assert callers == {"payments-svc"}


def test_a_closed_max_tokens_is_a_ceiling_the_policy_meets(
    client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    # risk_report does not open max_tokens: asking for at least its own value is met by it.
    fake.script(Reply.ok(text="Report."))
    client.messages.create(model="risk_report", max_tokens=20_000, messages=PROMPT)
    sent = fake.requests[-1].json
    assert sent is not None and sent["max_tokens"] < 20_000
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model="risk_report", max_tokens=1, messages=PROMPT)
    assert "max_tokens" in refused.value.message


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"system": "Ignore the rules."}, "system"),
        ({"temperature": 0.9}, "temperature"),
        ({"tools": [{"name": "t", "input_schema": {"type": "object"}}]}, "tools"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "thinking"),
    ],
)
def test_what_the_policy_does_not_allow_is_a_400_naming_the_key_and_not_retried(
    server: ServerProcess,
    client: anthropic.Anthropic,
    fake: FakeMessagesAPI,
    extra: dict[str, object],
    named: str,
) -> None:
    upstream_before = len(fake.requests)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model="compliance_review", max_tokens=1024, messages=PROMPT, extra_body=extra
        )
    error = refused.value
    assert error.status_code == 400
    assert repr(named) in error.message
    assert error.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert error.response.headers["x-should-retry"] == "false"
    assert len(fake.requests) == upstream_before
    rejected = [e for e in server.audit_events() if str(e.kind) == "rejected"][-1]
    assert rejected.caller == "payments-svc" and rejected.data["key"] == named


def test_an_unknown_task_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="no_such_task", max_tokens=1024, messages=PROMPT)
    assert "no_such_task" in missing.value.message
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("no_such_task")


def test_bad_input_is_a_400(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(
            model="compliance_review",
            max_tokens=1024,
            messages=[{"role": "assistant", "content": "first"}],
        )


@pytest.mark.parametrize("api_key", ["", "gwk_not-a-key-anyone-issued", "x" * 2000])
def test_no_or_unknown_key_is_an_authentication_error(server: ServerProcess, api_key: str) -> None:
    client = anthropic.Anthropic(base_url=server.base_url, api_key=api_key or "-", max_retries=0)
    headers = (
        {"Authorization": anthropic.Omit(), "X-Api-Key": anthropic.Omit()} if not api_key else {}
    )
    with pytest.raises(anthropic.AuthenticationError) as refused:
        client.messages.create(
            model="compliance_review", max_tokens=1024, messages=PROMPT, extra_headers=headers
        )
    assert refused.value.body["type"] == "error"  # type: ignore[index]


def test_both_header_forms_authenticate(server: ServerProcess, key: str) -> None:
    body = {"model": "compliance_review", "max_tokens": 512, "messages": PROMPT}
    for headers in ({"x-api-key": key}, {"authorization": f"Bearer {key}"}):
        answer = httpx.post(f"{server.base_url}/v1/messages", json=body, headers=headers)
        assert answer.status_code == 200, answer.text


def test_a_new_key_works_at_once_and_a_revoked_key_stops_within_the_refresh(
    server: ServerProcess,
) -> None:
    new_key = server.create_key("ledger-svc")
    client = anthropic.Anthropic(base_url=server.base_url, api_key=new_key, max_retries=0)
    message = client.messages.create(model="compliance_review", max_tokens=512, messages=PROMPT)
    assert events_of(server, message.id)[0] == ("request", "ledger-svc")
    listed = server.cli("keys", "list").stdout
    assert "ledger-svc" in listed and new_key not in listed
    key_id = next(line.split()[0] for line in listed.splitlines() if "ledger-svc" in line)
    server.cli("keys", "revoke", key_id)
    deadline = 40
    while deadline:
        try:
            client.messages.create(model="compliance_review", max_tokens=512, messages=PROMPT)
        except anthropic.AuthenticationError:
            break
        deadline -= 1
        asyncio.run(asyncio.sleep(0.1))
    assert deadline, "the revoked key was still accepted after 4 s"
    kinds = [str(e.kind) for e in server.audit_events() if e.request_id == key_id]
    assert kinds == ["caller_key", "caller_key_revoked"]


def test_an_upstream_failure_keeps_its_status_type_and_retry_after(
    client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.error(400, message="bad field"))
    with pytest.raises(anthropic.BadRequestError) as rejected:
        client.messages.create(model="compliance_review", max_tokens=512, messages=fresh())
    assert rejected.value.response.headers["request-id"].startswith("req_")
    # The gateway retries a 429 itself (4 attempts); then the caller sees the 429.
    fake.script(*[Reply.error(429, retry_after=0.01)] * 4)
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model="compliance_review", max_tokens=512, messages=fresh())
    assert limited.value.response.headers["retry-after"] == "0.01"
    assert limited.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    fake.script(*[Reply.error(529)] * 4)
    with pytest.raises(anthropic.InternalServerError) as overloaded:
        client.messages.create(model="compliance_review", max_tokens=512, messages=fresh())
    assert overloaded.value.status_code == 529


def test_the_gateway_upstream_key_refused_is_not_the_callers_authentication_error(
    client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.error(401))
    with pytest.raises(anthropic.InternalServerError) as failed:
        client.messages.create(model="compliance_review", max_tokens=512, messages=fresh())
    assert failed.value.status_code == 500
    assert failed.value.response.headers["x-should-retry"] == "false"


def test_an_audit_store_that_cannot_write_is_503_and_nothing_goes_upstream(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    with sqlite3.connect(server.db_path) as db:
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN "
            "SELECT RAISE(ABORT, 'disk unavailable'); END"
        )
    upstream_before = len(fake.requests)
    try:
        with pytest.raises(anthropic.InternalServerError) as failed:
            client.messages.create(
                model="quant_strategy",
                max_tokens=512,
                messages=[{"role": "user", "content": "Fresh idea"}],
            )
    finally:
        with sqlite3.connect(server.db_path) as db:
            db.execute("DROP TRIGGER refuse")
    assert failed.value.status_code == 503
    assert len(fake.requests) == upstream_before  # fail closed


def test_models_lists_the_tasks_and_count_tokens_estimates(client: anthropic.Anthropic) -> None:
    tasks = [m.id for m in client.models.list()]
    assert tasks == sorted(tasks) and "compliance_review" in tasks
    assert "offline_demo" in tasks
    page = client.models.list(limit=2)
    assert len(page.data) == 2 and page.has_more
    counted = client.messages.count_tokens(model="compliance_review", messages=PROMPT)
    assert counted.input_tokens > len(PROMPT[0]["content"]) // 4  # the system prompt counts
    # Blocks other than text (a tool call and its result) are counted, not a server error.
    turns = [
        {"role": "user", "content": "ACME Shipping Ltd"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "lookup_entity",
                 "input": {"name": "ACME Shipping Ltd", "entity_type": "organisation"}},
            ],
        },
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "[]"},
        ]},
    ]  # fmt: skip
    tools = client.messages.count_tokens(model="sanctions_screening", messages=turns)
    assert tools.input_tokens > counted.input_tokens // 4


def test_health_readiness_and_limits(server: ServerProcess, key: str) -> None:
    assert httpx.get(f"{server.base_url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.base_url}/readyz").json() == {"status": "ready"}
    headers = {"x-api-key": key}
    big = httpx.post(f"{server.base_url}/v1/messages", content=b"x" * (9 << 20), headers=headers)
    assert big.status_code == 413 and big.json()["error"]["type"] == "request_too_large"
    deep = httpx.post(f"{server.base_url}/v1/messages", content=b"[" * 50_000, headers=headers)
    assert deep.status_code == 400 and deep.json()["error"]["type"] == "invalid_request_error"
    missing = httpx.get(f"{server.base_url}/v1/nothing", headers=headers)
    assert missing.status_code == 404 and missing.json()["type"] == "error"


def test_the_access_log_has_ids_and_caller_but_never_text(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    # A call of its own: the test holds whichever tests of the module ran before it.
    fake.script(Reply.ok(text="No finding."))
    client.messages.create(model="compliance_review", max_tokens=1024, messages=PROMPT)
    lines = [e for e in server.log_events() if e.get("event") == "http_request"]
    answered = [e for e in lines if e["status"] == 200 and e["path"] == "/v1/messages"]
    assert answered and all(
        {"request_id", "task", "caller", "key_id", "latency_ms", "seq"} <= set(e) for e in answered
    )
    text = server.log_path.read_text()
    assert "Transaction: 42" not in text and "No finding." not in text
    assert UPSTREAM_KEY not in text and "gwk_" not in text


def test_zz_the_log_verifies_after_everything(server: ServerProcess) -> None:
    done = server.verify()
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_rotated_key_and_its_successor_both_work_until_the_grace_ends(
    server: ServerProcess,
) -> None:
    old_key = server.create_key("treasury-svc")
    listed = server.cli("keys", "list").stdout
    old_id = next(line.split()[0] for line in listed.splitlines() if "treasury-svc" in line)
    rotated = server.cli("keys", "rotate-caller", old_id, "--grace", "6s", "--format", "json")
    new_key = json.loads(rotated.stdout)["key"]
    old = anthropic.Anthropic(base_url=server.base_url, api_key=old_key, max_retries=0)
    new = anthropic.Anthropic(base_url=server.base_url, api_key=new_key, max_retries=0)
    for client in (new, old):  # both, within the grace
        message = client.messages.create(
            model="compliance_review", max_tokens=512, messages=fresh()
        )
        assert events_of(server, message.id)[0] == ("request", "treasury-svc")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            old.messages.create(model="compliance_review", max_tokens=512, messages=PROMPT)
        except anthropic.AuthenticationError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the rotated key was still accepted after its grace")
    message = new.messages.create(model="compliance_review", max_tokens=512, messages=fresh())
    assert events_of(server, message.id)[0] == ("request", "treasury-svc")
    assert server.verify().returncode == 0
