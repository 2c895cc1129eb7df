"""A log of many verifiable requests, written fast: for replay benchmarks and memory tests.

    seconds = generate(folder, 20_000)   # folder/audit.db; policies from ./policies

One compliance_review request is recorded through the real gateway against the loopback fake;
its REQUEST and RESPONSE are then repeated with a distinct prompt per request, each re-planned
with the recorded policy (the gateway's own plan_request and request hash), so every request
verifies and every body and answer is a payload of its own. Appended in batches
(``append_many``), signed by the gateway's record key when the settings give one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from audit import EventDraft, EventKind
from gateway import Gateway, Settings
from gateway._keys import request_hash_for
from gateway.catalog import Catalog
from gateway.policy import Policy, plan_request
from gateway.request import Recorder
from tests.fakes.messages_api import FakeMessagesAPI, Reply

ROOT = Path(__file__).resolve().parents[2]
TASK = "compliance_review"
CALLER = "payments-svc"
BATCH = 2_000  # requests per append_many transaction


def _settings(folder: Path, **extra: Any) -> Settings:
    return Settings(
        policy_dir=ROOT / "policies",
        database_url=f"sqlite:///{folder / 'audit.db'}",
        durability="os",
        **extra,
    )


def generate(folder: Path, requests: int) -> float:
    """Write a log of ``requests`` verifiable requests into ``folder``; seconds taken."""
    started = time.perf_counter()
    with FakeMessagesAPI() as fake:
        fake.script(Reply.ok(text="Verdict: compliant.\nNo rule breached."))
        settings = _settings(
            folder, anthropic_api_key="sk-ant-bench", anthropic_base_url=fake.base_url
        )
        with Gateway(settings) as gw:
            template_id = gw.complete(TASK, "Pay 10 EUR to ACME.", caller=CALLER).request_id
    recorder = Recorder.open(settings)
    store = recorder.store
    try:
        request, response = (
            e
            for e in store.events_for_request(template_id)
            if e.kind in (EventKind.REQUEST, EventKind.RESPONSE)
        )
        policy = Policy.from_content(store.policy_content(request.policy_fingerprint or "") or {})
        model = Catalog.load().get(str(request.data["model_id"]))
        assert model is not None
        answer = json.loads(store.payload(response.payload_digests["response_body"]))
        version = request.data.get("model_version")
        drafts: list[EventDraft] = []
        for i in range(1, requests):
            messages = [{"role": "user", "content": f"Pay {i} EUR to ACME, invoice {i:08d}."}]
            plan = plan_request(policy, model, messages, overrides={}, caller=CALLER)
            wire = json.dumps(plan.body).encode()
            request_hash = request_hash_for(plan, version)
            request_id = f"req_bench{i:010d}"
            answer["id"] = f"msg_bench{i:010d}"
            answer["content"][0]["text"] = f"Verdict: compliant.\nNo rule breached ({i})."
            common = {
                "request_id": request_id,
                "task": TASK,
                "caller": CALLER,
                "policy_fingerprint": policy.fingerprint,
                "request_hash": request_hash,
            }
            drafts.append(
                EventDraft(
                    kind=EventKind.REQUEST,
                    data=request.data,
                    payloads={"request_body": wire},
                    **common,
                )
            )
            drafts.append(
                EventDraft(
                    kind=EventKind.RESPONSE,
                    data=response.data,
                    payloads={"request_wire": wire, "response_body": json.dumps(answer).encode()},
                    **common,
                )
            )
            if len(drafts) >= 2 * BATCH:
                store.append_many(drafts)
                drafts = []
        if drafts:
            store.append_many(drafts)
    finally:
        store.close()
    return time.perf_counter() - started
