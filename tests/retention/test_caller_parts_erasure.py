"""A caller's own system prompt and tools are content: erasing a request erases them with its
request body, and no event keeps a copy (event bodies hold metadata and digests, never
prompts: docs/security.md, "The PostgreSQL roles"; a reviewer role reads every event body)."""

from __future__ import annotations

import pytest

from audit import AuditStore
from audit.canonical import canonical_bytes
from audit.errors import NotFound
from gateway import Gateway, Settings
from gateway.evidence import Erasing
from tests.fakes.messages_api import FakeMessagesAPI, Reply

SECRET = "Client 4711-ACME holds EUR 12m at risk"  # what a framework puts in its prompt


def test_an_erased_requests_own_prompt_and_tools_are_in_no_event(
    gw: Gateway, erasing: Erasing, settings: Settings, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok("ok"))
    tool = {
        "name": "positions",
        "description": f"Positions of the client in context ({SECRET}).",
        "input_schema": {"type": "object"},
    }
    answered = gw.complete(
        "general_assistant",
        "What is at risk?",
        caller="desk",
        overrides={"system": f"Context: {SECRET}.", "tools": [tool]},
    )
    erasing.erase(
        [answered.request_id], rule="subject_request", reason="DSAR", actor="j", approver="dpo"
    )
    with AuditStore.open(settings.database_url) as store:
        bodies = [canonical_bytes(e.data) for e in store.iter_events()]
        [request] = [
            e for e in store.events_for_request(answered.request_id) if e.kind == "request"
        ]
        with pytest.raises(NotFound):  # the request body is erased
            store.payload(request.payload_digests["request_body"])
    assert bodies and not any(SECRET.encode() in body for body in bodies)
