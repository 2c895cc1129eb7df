"""Invariant 12: nothing that fails authentication influences what is served, not even a
decision to skip the cache (and invariant 8: a candidate that does not check out fails the
request closed, with an INTEGRITY_ALERT naming it).

The replay lookup walks the RESPONSE candidates of a request hash newest first and skips the
ones that may not be served (not ok, alerted, not sent as recorded). Those three facts are
read from the candidate's body, so they must be read only once the candidate authenticates:
otherwise whoever can write the database edits the newest genuine answer to *look* alerted,
and the gateway silently serves an older answer of the attacker's choosing (or goes upstream)
instead of failing closed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore, EventKind
from gateway import IntegrityAlert
from tests.audit.conftest import Raw
from tests.gateway.conftest import MakeGateway

QUESTION = "Transaction: EUR 9,500 cash deposit, third this week, customer account 4471."


def _record_mode_copy(policy_dir: Path, tmp_path: Path) -> Path:
    """The same task under a ``record`` policy: the same wire body, so the same request hash;
    each call records one more answer for it."""
    target = tmp_path / "record-policies"
    shutil.copytree(policy_dir, target)
    path = target / "compliance_review.toml"
    text = path.read_text()
    text = text.replace("reproducible = true", "reproducible = false", 1)
    text = text.replace('mode = "replay"', 'mode = "record"', 1)
    path.write_text(text)
    return target


def _responses(url: str, request_hash: str) -> list[int]:
    raw = Raw(url)
    try:
        rows = raw.execute(
            "SELECT seq FROM events WHERE kind = ? AND request_hash = ? ORDER BY seq",
            (EventKind.RESPONSE.value, request_hash),
        )
    finally:
        raw.close()
    return [seq for (seq,) in rows]


@pytest.mark.parametrize(
    "edit",
    [
        {"alerts": [{"check": "model", "expected": "x", "actual": "y"}]},
        {"sent_as_recorded": False},
        {"ok": False},
    ],
    ids=["made-to-look-alerted", "made-to-look-not-sent-as-recorded", "made-to-look-not-ok"],
)
def test_a_tampered_newest_answer_fails_closed_rather_than_being_skipped(
    make_gateway: MakeGateway,
    policy_dir: Path,
    db_path: Path,
    tmp_path: Path,
    edit: dict[str, Any],
) -> None:
    url = f"sqlite:///{db_path}"
    recorder = make_gateway(offline=True, policy_dir=_record_mode_copy(policy_dir, tmp_path))
    first = recorder.complete("compliance_review", QUESTION, caller="desk")
    recorder.complete("compliance_review", QUESTION, caller="desk")
    older, newest = _responses(url, first.request_hash)

    raw = Raw(url)
    try:
        raw.unguard()  # whoever has the file can drop the triggers
        ((body,),) = raw.execute("SELECT body FROM events WHERE seq = ?", (newest,))
        parsed = json.loads(body)
        parsed["data"].update(edit)
        raw.execute(
            "UPDATE events SET body = ? WHERE seq = ?",
            (json.dumps(parsed, sort_keys=True, separators=(",", ":")).encode(), newest),
        )
    finally:
        raw.close()

    gw = make_gateway(offline=True)  # the reviewed replay policy
    try:
        served = gw.complete("compliance_review", QUESTION, caller="desk")
    except IntegrityAlert as alert:
        assert f"seq {newest}" in str(alert)
    else:
        with AuditStore.open(url, create=False) as store:
            hit = store.event(served.seq)
        pytest.fail(
            f"the tampered answer at seq {newest} decided what was served: "
            f"{hit.kind.value} (served_seq={hit.data.get('served_seq')}, older={older}), "
            "with no integrity alert"
        )
    with AuditStore.open(url, create=False) as store:
        alerts = [e.data for e in store.iter_events(kind=EventKind.INTEGRITY_ALERT)]
    assert [a["served_seq"] for a in alerts] == [newest]
