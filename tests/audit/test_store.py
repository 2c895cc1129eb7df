"""AuditStore on both backends: append, read back, find, content-addressed rows, failures."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

import audit
from audit import (
    AppendFailed,
    AuditStore,
    EventDraft,
    EventKind,
    InvalidEvent,
    NotFound,
)
from audit.canonical import canonical_bytes, canonical_digest, digest
from audit.store.chain import GENESIS, link_hash
from audit.verify import verify_log
from tests.audit.conftest import POLICY, Raw, fill


def test_public_names_are_pinned() -> None:
    expected = [
        "Appended",
        "AppendFailed",
        "AuditStore",
        "AuditStoreError",
        "Checkpoint",
        "CheckpointError",
        "ContentMismatch",
        "DatabaseUnavailable",
        "Defect",
        "DefectKind",
        "EventDraft",
        "EventKind",
        "EventFilter",
        "ExportSummary",
        "InvalidEvent",
        "NotFound",
        "RequestSummary",
        "SchemaMismatch",
        "StoredEvent",
        "VerifyReport",
        "export_events",
        "list_requests",
    ]
    assert sorted(audit.__all__) == sorted(expected)


def test_append_returns_seq_and_a_hash_over_prev_and_the_stored_body(store: AuditStore) -> None:
    first = store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1", data={"a": 1}))
    second = store.append(EventDraft(kind=EventKind.RESPONSE, request_id="r1", data={"ok": True}))
    assert (first.seq, second.seq) == (1, 2)
    one, two = store.event(1), store.event(2)
    assert one.prev_hash == GENESIS
    assert one.hash == first.hash == link_hash(GENESIS, one.body)
    assert two.prev_hash == one.hash
    assert two.hash == link_hash(one.hash, two.body)
    # the body is stored exactly as hashed: canonical bytes of what it parses to
    import json

    assert canonical_bytes(json.loads(two.body)) == two.body


def test_body_binds_searchable_columns_time_and_durability(store: AuditStore) -> None:
    import json

    appended = store.append(
        EventDraft(
            kind=EventKind.REQUEST, request_id="r9", task="t", caller="c",
            policy_fingerprint=None, request_hash="sha256:" + "a" * 64, data={"x": [1, 2]},
        )
    )  # fmt: skip
    event = store.event(appended.seq)
    body = json.loads(event.body)
    assert body["task"] == event.task == "t"
    assert body["caller"] == event.caller == "c"
    assert body["request_hash"] == event.request_hash
    assert body["durability"] == "fsync"
    assert body["seq"] == appended.seq
    assert event.recorded_at == appended.recorded_at
    assert event.recorded_at.tzinfo is not None
    assert body["recorded_at"] == appended.recorded_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert event.data == {"x": [1, 2]}


def test_payloads_and_policies_are_stored_once_by_digest(store: AuditStore, raw: Raw) -> None:
    fill(store, requests=3)  # every request carries the same policy content
    event = store.event(1)
    ref = event.payload_digests["request_body"]
    assert store.payload(ref) == b'{"prompt": 0}'
    assert ref == digest(b'{"prompt": 0}')
    assert store.policy_content(canonical_digest(POLICY)) == POLICY
    assert raw.execute("SELECT COUNT(*) FROM policies")[0][0] == 1
    assert raw.execute("SELECT COUNT(*) FROM payloads")[0][0] == 6
    store.append(
        EventDraft(kind=EventKind.REQUEST, request_id="again", payloads={"b": b'{"prompt": 0}'})
    )
    assert raw.execute("SELECT COUNT(*) FROM payloads")[0][0] == 6
    with pytest.raises(NotFound):
        store.payload("sha256:" + "0" * 64)
    assert store.policy_content("sha256:" + "0" * 64) is None


def test_reads_by_request_and_filters(store: AuditStore) -> None:
    fill(store, requests=2)
    assert [e.kind for e in store.events_for_request("req-1")] == [
        EventKind.REQUEST,
        EventKind.RESPONSE,
    ]
    assert [e.seq for e in store.iter_events(kind=EventKind.RESPONSE)] == [2, 4]
    assert [e.seq for e in store.iter_events(after_seq=2)] == [3, 4]
    assert list(store.iter_events(task="other")) == []
    assert len(list(store.iter_events(caller="payments-svc"))) == 4
    now = datetime.now(UTC)
    assert len(list(store.iter_events(since=now - timedelta(minutes=5)))) == 4
    assert list(store.iter_events(until=now - timedelta(minutes=5))) == []
    with pytest.raises(NotFound):
        store.event(99)


def test_iter_events_streams_across_pages(store: AuditStore) -> None:
    import audit.verify._walk as walk_module

    for n in range(5):
        store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"p{n}"))
    rows = list(store._rows([], page=2))  # three pages of 2, 2 and 1
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5]
    assert walk_module.PAGE >= 100


def test_find_response_returns_newest_ok_response_only(store: AuditStore) -> None:
    h = "sha256:" + "b" * 64

    def response(ok: bool, n: int) -> EventDraft:
        return EventDraft(
            kind=EventKind.RESPONSE, request_id=f"r{n}", request_hash=h, data={"ok": ok, "n": n}
        )

    assert store.find_response(h) is None
    store.append(response(True, 1))
    store.append(response(True, 2))
    store.append(response(False, 3))  # a flagged invalid JSON output is never served
    store.append(EventDraft(kind=EventKind.CACHE_HIT, request_id="r4", request_hash=h))
    found = store.find_response(h)
    assert found is not None and found.data["n"] == 2
    assert store.find_response("sha256:" + "c" * 64) is None


def test_draft_that_cannot_be_canonicalised_writes_nothing(store: AuditStore) -> None:
    with pytest.raises(InvalidEvent):
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r", data={"x": float("nan")}))
    with pytest.raises(InvalidEvent):
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r", data={"x": 2**60}))
    with pytest.raises(InvalidEvent):
        store.append(
            EventDraft(
                kind=EventKind.REQUEST, request_id="r",
                policy_fingerprint="sha256:" + "0" * 64, policy_content=POLICY,
            )
        )  # fmt: skip
    assert store.head()[0] == 0


def test_database_error_raises_append_failed_and_writes_nothing(
    store: AuditStore, raw: Raw
) -> None:
    store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1"))
    # A payload row that breaks the schema makes the whole transaction fail: no event either.
    raw.execute("ALTER TABLE payloads RENAME TO payloads_gone")
    with pytest.raises(AppendFailed) as caught:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r2", payloads={"b": b"x"}))
    assert "Nothing was written" in str(caught.value)
    assert store.head()[0] == 1


def test_threads_share_one_gap_free_chain_with_group_commit(store: AuditStore) -> None:
    per_thread, threads = 40, 8
    seqs: list[int] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        for n in range(per_thread):
            seq = store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"t{t}-{n}")).seq
            with lock:
                seqs.append(seq)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    total = per_thread * threads
    assert sorted(seqs) == list(range(1, total + 1))
    assert store.group_commits < total  # waiting appends were committed together
    assert verify_log(store).ok


def test_a_bad_draft_in_a_group_does_not_fail_the_others(store: AuditStore) -> None:
    # Exercise the committer directly: a batch whose commit fails is retried item by item.
    from audit.store._group import GroupCommitter

    def commit(batch: list[int]) -> list[int]:
        if 13 in batch:
            raise ValueError("unlucky")
        return [n * 2 for n in batch]

    committer: GroupCommitter[int, int] = GroupCommitter(commit)
    results: dict[int, object] = {}
    barrier = threading.Barrier(8)

    def run(n: int) -> None:
        barrier.wait()
        try:
            results[n] = committer.submit(n)
        except ValueError as exc:
            results[n] = exc

    workers = [threading.Thread(target=run, args=(n,)) for n in range(10, 18)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert isinstance(results[13], ValueError)
    assert {n: r for n, r in results.items() if n != 13} == {
        n: n * 2 for n in range(10, 18) if n != 13
    }


def test_os_durability_is_recorded_in_every_event(any_url: str) -> None:
    import json

    with AuditStore.open(any_url, durability="os") as store:
        seq = store.append(EventDraft(kind=EventKind.REQUEST, request_id="r")).seq
        assert json.loads(store.event(seq).body)["durability"] == "os"


def test_verify_reports_progress_per_page(store: AuditStore) -> None:
    for n in range(5):
        store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"p{n}"))
    calls: list[tuple[int, int]] = []
    report = verify_log(store, lambda done, total: calls.append((done, total)), page_rows=2)
    assert report.ok and report.events_checked == 5
    assert calls == [(2, 5), (4, 5), (5, 5)]
