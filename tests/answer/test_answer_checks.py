"""What an answer says about itself is recorded, and checked against the policy: the model
that answered, where inference ran, the service tier, a refusal's stop details, thinking's
display, server-side context edits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore, EventKind, StoredEvent
from audit.verify import verify_log
from gateway import Gateway
from gateway.errors import PolicyViolation
from tests.answer.conftest import WriteTask
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway, events, kinds

PROMPT = "Transaction: EUR 9,900 from Jane Roe to ACME Shipping Ltd."


def _of(db_path: Path, request_id: str, kind: EventKind) -> list[StoredEvent]:
    return [e for e in events(db_path) if e.request_id == request_id and e.kind == kind]


def _response(db_path: Path, request_id: str) -> dict[str, Any]:
    (event,) = _of(db_path, request_id, EventKind.RESPONSE)
    return event.data


def _verifies(db_path: Path) -> None:
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        report = verify_log(store)
    assert report.ok, report


# -- the model that answered ------------------------------------------------------------------


def test_an_answer_from_another_model_is_recorded_with_an_alert(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(text="Approved.", model="claude-opus-4-6"))
    result = gw.complete("compliance_review", PROMPT)

    assert result.text == "Approved."  # the answer is still returned
    assert result.model == "claude-opus-4-6"
    data = _response(db_path, result.request_id)
    assert data["model"] == "claude-opus-4-6"
    assert data["alerts"] == [
        {
            "check": "model",
            "expected": "claude-sonnet-4-6",
            "reported": "claude-opus-4-6",
            "reason": "the answer names another model than the pinned one",
        }
    ]
    (alert,) = _of(db_path, result.request_id, EventKind.ANSWER_ALERT)
    assert alert.data["check"] == "model"
    assert alert.data["response_seq"] == result.seq
    assert kinds(db_path, result.request_id) == ["request", "response", "answer_alert"]
    _verifies(db_path)


def test_an_answer_from_the_pinned_model_raises_no_alert(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    result = gw.complete("compliance_review", PROMPT)
    assert "alerts" not in _response(db_path, result.request_id)
    assert kinds(db_path, result.request_id) == ["request", "response"]


def test_a_streamed_answer_from_another_model_is_alerted_too(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream("Approved after review.", model="claude-opus-4-6"))
    with gw.stream("compliance_review", PROMPT) as stream:
        for _event in stream:
            pass
    result = stream.result
    assert _response(db_path, result.request_id)["alerts"][0]["reported"] == "claude-opus-4-6"
    assert kinds(db_path, result.request_id)[-1] == "answer_alert"


@pytest.mark.parametrize(
    ("field", "key"),
    [
        ("fallbacks", "model.id"),
        ("context_management", "context_management"),
        ("inference_geo", "model.inference_geo"),
        ("metadata", "caller.forward_user_id"),
    ],
)
def test_fields_no_caller_may_set_are_refused_and_recorded(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path, field: str, key: str
) -> None:
    value: dict[str, Any] = {
        "fallbacks": {"models": ["claude-opus-4-6"]},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "inference_geo": "global",
        "metadata": {"user_id": "payments-svc"},
    }
    with pytest.raises(PolicyViolation, match="no caller may set") as caught:
        gw.complete("compliance_review", PROMPT, overrides={field: value[field]})
    assert caught.value.key == key
    assert fake_api.requests == []  # nothing sent
    (rejected,) = [e for e in events(db_path) if e.kind == EventKind.REJECTED]
    assert rejected.data["key"] == key


def test_the_planner_names_the_pinned_model_when_refusing_fallbacks(gw: Gateway) -> None:
    with pytest.raises(PolicyViolation, match="another model than the pinned 'claude-sonnet-4-6'"):
        gw.complete("compliance_review", PROMPT, overrides={"fallbacks": []})


# -- where inference ran ----------------------------------------------------------------------


@pytest.fixture
def geo_gw(write_task: WriteTask, make_gateway: MakeGateway) -> Gateway:
    write_task("us_only", model='inference_geo = "us"')
    return make_gateway()


def test_the_pinned_region_is_sent_and_its_echo_recorded(
    geo_gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(inference_geo="us"))
    result = geo_gw.complete("us_only", PROMPT)
    assert fake_api.requests[0].json is not None
    assert fake_api.requests[0].json["inference_geo"] == "us"
    data = _response(db_path, result.request_id)
    assert data["inference_geo"] == "us"
    assert "alerts" not in data


@pytest.mark.parametrize(
    ("reported", "reason"),
    [("global", "elsewhere than the policy pins"), (None, "does not report inference")],
)
def test_inference_elsewhere_or_unreported_is_an_alert(
    geo_gw: Gateway,
    fake_api: FakeMessagesAPI,
    db_path: Path,
    reported: str | None,
    reason: str,
) -> None:
    fake_api.script(Reply.ok(inference_geo=reported))
    result = geo_gw.complete("us_only", PROMPT)
    (alert,) = _response(db_path, result.request_id)["alerts"]
    assert alert["check"] == "inference_geo"
    assert alert["expected"] == "us"
    assert alert["reported"] == reported
    assert reason in alert["reason"]
    assert kinds(db_path, result.request_id)[-1] == "answer_alert"


def test_a_policy_without_a_region_sends_none_and_checks_none(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(inference_geo="global"))
    result = gw.complete("compliance_review", PROMPT)
    assert fake_api.requests[0].json is not None
    assert "inference_geo" not in fake_api.requests[0].json
    data = _response(db_path, result.request_id)
    assert data["inference_geo"] == "global"  # recorded all the same
    assert "alerts" not in data


def test_the_region_is_part_of_the_fingerprint_only_when_set(
    geo_gw: Gateway, make_gateway: MakeGateway
) -> None:
    pinned = geo_gw._core.policies.get("us_only")
    assert pinned.content()["inference_geo"] == "us"
    shipped = geo_gw._core.policies.get("compliance_review").content()
    assert "inference_geo" not in shipped
    assert "forward_user_id" not in shipped["caller"]


def test_an_offline_run_of_a_pinned_region_sends_no_region(
    write_task: WriteTask, make_gateway: MakeGateway, db_path: Path
) -> None:
    write_task("us_only", model='inference_geo = "us"')
    result = make_gateway(offline=True).complete("us_only", "The reviewer reads the")
    assert "alerts" not in _response(db_path, result.request_id)  # nothing left the machine


# -- service tier, refusals -------------------------------------------------------------------


def test_the_service_tier_and_a_refusals_stop_details_are_recorded(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Could enable harm."}
    fake_api.script(
        Reply.ok(text="", stop_reason="refusal", stop_details=details, service_tier="priority")
    )
    result = gw.complete("compliance_review", PROMPT)
    data = _response(db_path, result.request_id)
    assert data["stop_reason"] == "refusal"
    # The explanation is the model's words (it may quote the prompt): by length only.
    assert data["stop_details"] == {
        "type": "refusal",
        "category": "cyber",
        "explanation_chars": len(details["explanation"]),
    }
    assert data["service_tier"] == "priority"


# -- thinking ---------------------------------------------------------------------------------


@pytest.fixture
def thinking_gw(write_task: WriteTask, make_gateway: MakeGateway) -> Gateway:
    write_task("shown", generation='thinking = { type = "adaptive", display = "summarized" }')
    write_task("hidden", generation='thinking = { type = "adaptive", display = "omitted" }')
    return make_gateway()


def test_summarised_reasoning_is_recorded_as_auditable(
    thinking_gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(thinking=(("The payer is screened first.", "sig-1"),)))
    result = thinking_gw.complete("shown", PROMPT)
    assert fake_api.requests[0].json is not None
    assert fake_api.requests[0].json["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert _response(db_path, result.request_id)["thinking"] == {
        "requested_display": "summarized",
        "blocks": 1,
        "shown": 1,
        "omitted": 0,
        "redacted": 0,
        "auditable": True,
    }


def test_omitted_reasoning_is_recorded_as_not_auditable(
    thinking_gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(thinking=(("", "sig-1"), ("", "sig-2"))))
    result = thinking_gw.complete("hidden", PROMPT)
    thinking = _response(db_path, result.request_id)["thinking"]
    assert thinking["requested_display"] == "omitted"
    assert (thinking["shown"], thinking["omitted"], thinking["auditable"]) == (0, 2, False)


def test_a_display_changes_the_fingerprint_and_none_keeps_it(thinking_gw: Gateway) -> None:
    policies = thinking_gw._core.policies
    shown = policies.get("shown").content()["generation"]["thinking"]
    assert shown == {"type": "adaptive", "budget_tokens": None, "display": "summarized"}
    assert policies.get("shown").fingerprint != policies.get("hidden").fingerprint


def test_an_answer_without_thinking_records_nothing_about_it(gw: Gateway, db_path: Path) -> None:
    result = gw.complete("compliance_review", PROMPT)
    assert "thinking" not in _response(db_path, result.request_id)


# -- server-side context edits ----------------------------------------------------------------


def test_context_edits_the_server_applied_are_recorded_and_alerted(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    applied = {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2}]}
    fake_api.script(Reply.ok(context_management=applied))
    result = gw.complete("compliance_review", PROMPT)
    data = _response(db_path, result.request_id)
    assert data["context_management"] == applied
    (alert,) = data["alerts"]
    assert alert["check"] == "context_management"
    assert alert["reported"] == ["clear_tool_uses_20250919"]
