"""`gateway serve` (a real process) records the `x-gateway-subject` header as a keyed digest,
and `gateway audit erase --subject` erases that caller's requests about the subject."""

from __future__ import annotations

import anthropic
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess, fake, server

__all__ = ["fake", "server"]

pytestmark = pytest.mark.slow  # `gateway serve` as a process

PROMPT = [{"role": "user", "content": "Pay 100 EUR to ACME Ltd for invoice 7."}]


def test_the_subject_header_is_recorded_keyed_and_erasable(
    server: ServerProcess, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.ok(text="No finding."))
    client = anthropic.Anthropic(
        base_url=server.base_url, api_key=server.create_key("desk-s"), max_retries=0
    )
    raw = client.messages.with_raw_response.create(
        model="compliance_review", max_tokens=512, messages=PROMPT,  # type: ignore[arg-type]
        extra_headers={"x-gateway-subject": "customer-77"},
    )  # fmt: skip
    request_id = raw.headers["request-id"]
    [request] = [
        e for e in server.audit_events() if e.request_id == request_id and e.kind == "request"
    ]
    assert str(request.data["subject"]).startswith("hmac-sha256:")
    assert b"customer-77" not in server.db_path.read_bytes()
    done = server.cli(
        "audit", "erase", "--subject", "customer-77", "--reason", "DSAR-1", "--approver", "dpo"
    )
    assert f"erased {request_id}" in done.stdout
    assert server.verify().returncode == 0
