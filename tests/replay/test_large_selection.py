"""A selection is loaded page by page, in order, payloads included; a verify run streams its
rows (the report keeps none) and appends its outcome events in batches, each row naming its
own REPLAY event."""

from __future__ import annotations

import json
from collections.abc import Callable

from click.testing import Result

from audit import AuditStore, EventKind
from gateway.catalog import Catalog
from gateway.keys import cache_key
from gateway.replay import Outcome, Replayer, RequestReplay, Selection
from gateway.replay._loading import load_selection
from gateway.settings import Settings
from tests.replay.conftest import Recorded
from tests.replay.helpers import replay_events

Cli = Callable[..., Result]


def _request_ids(url: str) -> list[str]:
    with AuditStore.open(url, "os") as store:
        return [e.request_id for e in store.iter_events(kind=EventKind.REQUEST)]


def test_pages_of_two_load_every_request_in_order_with_its_payloads(recorded: Recorded) -> None:
    every = _request_ids(recorded.url)
    assert len(every) == 4  # the cache hit has no REQUEST
    cases = [
        (Selection(limit=None), every),
        (Selection(limit=3), every[-3:]),
        (Selection(task="quant_strategy", limit=None), [recorded.ids["quant"]]),
    ]
    with AuditStore.open(recorded.url, "os") as store:
        for selection, expected in cases:
            selected = load_selection(store, selection, page=2)
            loaded = list(selected)
            assert len(selected) == len(expected)
            assert [r.request_id for r in loaded] == expected
            for r in loaded:
                assert r.request is not None and r.policy is not None
                assert set(r.request.payload_digests.values()) <= set(r.payloads)


def test_a_streamed_verify_keeps_no_rows_and_records_each(recorded: Recorded) -> None:
    seen: list[RequestReplay] = []
    with AuditStore.open(recorded.url, "os") as store:
        key = cache_key(Settings(database_url=recorded.url), create=False)
        replayer = Replayer(store, Catalog.load(), cache_key=key)
        prepared = replayer.prepare(Selection(limit=None))
        report = replayer.run(prepared, seen.append, keep_rows=False)
    assert report.requests == () and report.summary.total == len(seen) == 4
    assert report.summary.counts["passed"] == 4 and not report.any_failed
    assert report.title.startswith("Replay report: verify: recorded on ")
    events = replay_events(recorded.url)
    assert [r.replay_seq for r in seen] == [e.seq for e in events]
    assert [r.request_id for r in seen] == [e.data["original_request_id"] for e in events]
    assert all(r.outcome is Outcome.PASSED for r in seen)


def test_the_cli_prints_streamed_rows_after_the_summary(cli: Cli, recorded: Recorded) -> None:
    lines = cli("--all", "--format", "jsonl").stdout.splitlines()
    head = json.loads(lines[0])
    assert head["summary"]["total"] == 4 and head["summary"]["counts"]["passed"] == 4
    rows = [json.loads(line) for line in lines[1:]]
    assert [r["request_id"] for r in rows] == _request_ids(recorded.url)
    table = cli("--all").stdout.splitlines()
    assert (
        table[0] == "verify: 4 request(s): 0 identical, 0 differing, 0 failed, 0 skipped, 4 passed"
    )
    assert table[3] == "selection: requests all matching"  # the header states the selection
    assert table[4].split()[0] == "seq" and len(table) == 5 + 4


def test_json_output_is_written_row_by_row_as_one_indented_document(
    cli: Cli, recorded: Recorded
) -> None:
    text = cli("--all", "--format", "json").stdout
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    assert [r["request_id"] for r in document["requests"]] == _request_ids(recorded.url)
    assert document["summary"]["total"] == 4 and document["tasks"]
    assert sum(t["total"] for t in document["tasks"]) == 4
    empty = cli("--task", "no_such_task", "--format", "json").stdout
    assert json.loads(empty)["requests"] == [] and empty.count('"requests": []') == 1
