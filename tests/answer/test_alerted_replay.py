"""An answer whose self-report broke its policy's pins (an alerted answer) is never served as a
replay hit: the identical request goes upstream again, and the alert stays in the log."""

from __future__ import annotations

from pathlib import Path

from audit import AuditStore, EventKind
from audit.verify import verify_log
from gateway import Gateway
from tests.answer.conftest import WriteTask
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway, events, kinds

PROMPT = "Transaction: EUR 9,900 from Jane Roe to ACME Shipping Ltd."
OTHER_MODEL = "claude-opus-4-6"  # compliance_review pins claude-sonnet-4-6


def _alerts(db_path: Path) -> list[int]:
    return [e.data["response_seq"] for e in events(db_path) if e.kind == EventKind.ANSWER_ALERT]


def test_an_answer_from_another_model_is_not_served_again(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(text="Approved.", model=OTHER_MODEL))
    first = gw.complete("compliance_review", PROMPT)
    assert first.model == OTHER_MODEL and not first.cached

    again = gw.complete("compliance_review", PROMPT)  # the same process: its memo too

    assert not again.cached
    assert len(fake_api.requests) == 2  # went upstream again
    assert again.model == "claude-sonnet-4-6"  # the fake's default answers as asked
    assert kinds(db_path, again.request_id) == ["request", "response"]
    assert _alerts(db_path) == [first.seq]  # the alert stays
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        assert verify_log(store).ok


def test_a_new_gateway_does_not_serve_an_alerted_answer_from_the_log(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(text="Approved.", model=OTHER_MODEL))
    first = make_gateway().complete("compliance_review", PROMPT)

    again = make_gateway().complete("compliance_review", PROMPT)  # reads the log, no memo

    assert not again.cached
    assert len(fake_api.requests) == 2
    assert _alerts(db_path) == [first.seq]


def test_the_clean_answer_that_follows_is_served(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(text="Approved.", model=OTHER_MODEL))
    make_gateway().complete("compliance_review", PROMPT)
    clean = make_gateway().complete("compliance_review", PROMPT)

    hit = make_gateway().complete("compliance_review", PROMPT)

    assert hit.cached and hit.text == clean.text
    assert len(fake_api.requests) == 2
    (served,) = [e for e in events(db_path) if e.kind == EventKind.CACHE_HIT]
    assert served.data["served_seq"] == clean.seq


def test_an_answer_from_another_region_is_not_served_again(
    write_task: WriteTask,
    make_gateway: MakeGateway,
    fake_api: FakeMessagesAPI,
    db_path: Path,
    policy_dir: Path,
) -> None:
    write_task("us_only", model='inference_geo = "us"')
    policy = policy_dir / "us_only.toml"
    policy.write_text(policy.read_text(encoding="utf-8") + '\n[cache]\nmode = "replay"\n')
    gateway = make_gateway()
    fake_api.script(Reply.ok(inference_geo="global"))
    first = gateway.complete("us_only", PROMPT)
    fake_api.script(Reply.ok(inference_geo="us"))

    again = gateway.complete("us_only", PROMPT)
    hit = gateway.complete("us_only", PROMPT)

    assert not again.cached and hit.cached
    assert len(fake_api.requests) == 2
    assert _alerts(db_path) == [first.seq]
