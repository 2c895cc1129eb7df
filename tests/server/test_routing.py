"""Real Claude model ids through `gateway serve` (a real process, the official SDK): the
reviewed routing table and the caller key's default task pick the task, a policy's model
choices let the asked model answer, an unrouted model is a 404 that says what to ask for,
and GET /v1/models describes each task and routed model id as the Models API does."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx2 as httpx
import pytest

from audit import StoredEvent
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import SHIPPED, ServerProcess, running_server

pytestmark = pytest.mark.slow  # `gateway serve` as a process

PROMPT = [{"role": "user", "content": "Draft a note to the desk."}]

ASSISTANT = """\
schema = 1
description = "A desk assistant for tests."
owner = "tests"

[model]
id = "claude-sonnet-4-6"

[generation]
max_tokens = 1024

[prompt]
system_file = "prompts/risk_report.md"

[cache]
mode = "record"

[caller]
max_tokens = { min = 16, max = 2048 }
"""

RESEARCH = ASSISTANT.replace(
    'id = "claude-sonnet-4-6"', 'id = "claude-sonnet-4-6"\nchoices = ["claude-opus-4-6"]'
)

ROUTES = """\
schema = 1
description = "Routes for tests."
owner = "tests"

[[route]]
caller = "*"
model = "*"
task = "desk_assistant"

[[route]]
caller = "research-desk"
model = "claude-opus-4-6"
task = "research"
"""


@pytest.fixture(scope="module")
def routed(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("routed")
    policies = home / "policies"
    shutil.copytree(SHIPPED, policies)
    (policies / "desk_assistant.toml").write_text(ASSISTANT)
    (policies / "research.toml").write_text(RESEARCH)
    (policies / "routes.toml").write_text(ROUTES)
    with running_server(home, fake) as server:
        yield server


def client_for(server: ServerProcess, caller: str, *task: str) -> anthropic.Anthropic:
    args = ["keys", "create", "--caller", caller, *(["--task", task[0]] if task else [])]
    key = server.cli(*args).stdout.strip()
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def intent(server: ServerProcess, request_id: str) -> StoredEvent:
    (request,) = [
        e for e in server.audit_events() if e.request_id == request_id and e.kind == "request"
    ]
    return request


def recorded_task(server: ServerProcess, request_id: str) -> str | None:
    return intent(server, request_id).task


def test_a_real_model_id_is_routed_by_the_table_for_any_caller(
    routed: ServerProcess, fake: FakeMessagesAPI
) -> None:
    client = client_for(routed, "payments-svc")
    fake.script(Reply.ok(text="Noted."))
    message = client.messages.create(model="claude-sonnet-4-6", max_tokens=512, messages=PROMPT)
    assert message.content[0].text == "Noted."  # type: ignore[union-attr]
    assert recorded_task(routed, message.id) == "desk_assistant"
    # Another current Claude model goes to the same task, answered by its pinned model.
    fake.script(Reply.ok(text="Noted again."))
    other = client.messages.create(model="claude-opus-4-6", max_tokens=512, messages=PROMPT)
    assert recorded_task(routed, other.id) == "desk_assistant"
    assert fake.requests[-1].json["model"] == "claude-sonnet-4-6"  # type: ignore[index]


def test_a_callers_own_route_wins_and_its_model_choice_answers(
    routed: ServerProcess, fake: FakeMessagesAPI
) -> None:
    client = client_for(routed, "research-desk")
    fake.script(Reply.ok(text="Findings."))
    message = client.messages.create(model="claude-opus-4-6", max_tokens=512, messages=PROMPT)
    assert recorded_task(routed, message.id) == "research"
    assert message.model == "claude-opus-4-6"
    assert fake.requests[-1].json["model"] == "claude-opus-4-6"  # type: ignore[index]
    assert intent(routed, message.id).data["model_id"] == "claude-opus-4-6"  # as the model
    # Named by the header, the task still lets the asked model answer when it is a choice.
    other = client_for(routed, "payments-svc")
    fake.script(Reply.ok(text="Findings."))
    by_header = other.messages.create(
        model="claude-opus-4-6",
        max_tokens=512,
        messages=PROMPT,
        extra_headers={"x-gateway-task": "research"},
    )
    assert by_header.model == "claude-opus-4-6"


def test_a_key_with_a_default_task_needs_no_task_name_and_the_header_still_wins(
    routed: ServerProcess, fake: FakeMessagesAPI
) -> None:
    client = client_for(routed, "reviews-svc", "compliance_review")
    listed = routed.cli("keys", "list", "--format", "json").stdout
    assert '"task": "compliance_review"' in listed
    fake.script(Reply.ok(text="No finding."))
    message = client.messages.create(model="house-model", max_tokens=1024, messages=PROMPT)
    assert recorded_task(routed, message.id) == "compliance_review"
    fake.script(Reply.ok(text="Header."))
    by_header = client.messages.create(
        model="house-model",
        max_tokens=512,
        messages=PROMPT,
        extra_headers={"x-gateway-task": "desk_assistant"},
    )
    assert recorded_task(routed, by_header.id) == "desk_assistant"


def test_an_unrouted_model_is_a_404_naming_the_callers_routes_and_the_header(
    routed: ServerProcess,
) -> None:
    client = client_for(routed, "payments-svc")
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(model="gpt-4o", max_tokens=512, messages=PROMPT)
    message = str(caught.value)
    assert "'gpt-4o' is neither a task nor a model id routed for caller 'payments-svc'" in message
    assert "any current Claude model (task desk_assistant)" in message
    assert "x-gateway-task" in message
    assert "research" in message  # a task it may name
    assert "claude-opus-4-6 (task research)" not in message  # another caller's route
    assert "add a policy file" not in message.lower()
    # The refusal is on the record, as every refused request is.
    rejected = [e for e in routed.audit_events() if e.kind == "rejected"]
    assert rejected and rejected[-1].request_id == caught.value.body["request_id"]  # type: ignore[index]


def test_models_lists_tasks_and_routed_model_ids_in_the_models_api_shape(
    routed: ServerProcess,
) -> None:
    client = client_for(routed, "research-desk")
    listed = {m.id: m for m in client.models.list(limit=1000)}
    assert {"desk_assistant", "research", "compliance_review", "claude-sonnet-4-6"} <= set(listed)
    assert "claude-mythos-preview" not in listed  # retired: no route admits it
    assert "local:ngram" not in listed
    assistant = listed["desk_assistant"]
    assert assistant.type == "model"
    assert assistant.max_tokens == 2048  # what the policy lets a caller ask for
    assert assistant.max_input_tokens is not None and assistant.max_input_tokens > 0
    assert assistant.capabilities is not None
    assert assistant.capabilities.thinking.supported is False  # not opened to callers
    assert assistant.capabilities.structured_outputs.supported is False
    # The research desk's own route: the model it asks for answers, sized as that model.
    opus = client.models.retrieve("claude-opus-4-6")
    assert opus.id == "claude-opus-4-6"
    assert opus.max_tokens == 2048
    raw = httpx.get(
        f"{routed.base_url}/v1/models/claude-opus-4-6",
        headers={"x-api-key": client.api_key},
    ).json()
    assert raw["gateway"] == {
        "task": "research",
        "model": "claude-opus-4-6",
        "contract": "strict",
        "tools": "none",
        "fingerprint": raw["gateway"]["fingerprint"],
    }
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_a_table_that_does_not_load_routes_nothing(tmp_path: Path, fake: FakeMessagesAPI) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(SHIPPED, policies)
    (policies / "routes.toml").write_text(ROUTES)  # desk_assistant and research do not exist
    with running_server(tmp_path, fake) as server:
        done = server.cli("policy", "review", check=False)
        assert done.returncode != 0
        assert "route-unknown-task" in done.stdout
        client = client_for(server, "payments-svc")
        with pytest.raises(anthropic.NotFoundError) as caught:
            client.messages.create(model="claude-sonnet-4-6", max_tokens=512, messages=PROMPT)
        assert "no routed model ids" in str(caught.value)


def test_the_shipped_table_lets_a_new_key_send_a_real_model_id_and_records_what_it_brought(
    server: ServerProcess, fake: FakeMessagesAPI
) -> None:
    client = client_for(server, "desk-assistants")
    fake.script(Reply.ok(text="Hello."))
    message = client.messages.create(
        model="claude-opus-4-7",
        max_tokens=20000,  # above the general assistant's ceiling: met by it, not refused
        system="You answer for the payments desk.",
        messages=PROMPT,
    )
    assert recorded_task(server, message.id) == "general_assistant"
    shown = server.cli("audit", "show", message.id).stdout
    assert "contract opened; caller-supplied: system prompt" in shown
    listed = {m.id: m for m in client.models.list(limit=1000)}
    assistant = listed["general_assistant"]
    assert assistant.max_tokens == 16000  # the ceiling a caller's max_tokens is capped to
    assert assistant.capabilities is not None
    assert assistant.capabilities.thinking.supported is True
    assert assistant.capabilities.thinking.types.adaptive.supported is True
    assert assistant.capabilities.effort.high.supported is True
    assert assistant.capabilities.effort.max.supported is False  # not within the bounds
    assert listed["claude-opus-4-7"].max_tokens == 16000  # routed there, sized the same
    counted = client.messages.count_tokens(model="claude-opus-4-7", messages=PROMPT)
    assert counted.input_tokens > 0  # routed like a message
    strict = listed["compliance_review"]
    assert strict.capabilities is not None and strict.capabilities.thinking.supported is False
