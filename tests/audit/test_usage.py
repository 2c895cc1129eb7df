"""`gateway audit usage`: tokens and cost per caller, task or model from the recorded usage,
priced from the catalog with a dated source, and "unpriced" where no price is sourced."""

from __future__ import annotations

import csv
import io
import json
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from click.testing import CliRunner, Result
from sqlalchemy.engine import Engine

from audit import AuditStore, EventDraft, EventFilter, EventKind
from gateway import Settings
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.evidence import Auditing
from gateway.keys import record_signer


def _answer(
    store: AuditStore,
    rid: str,
    *,
    caller: str,
    task: str,
    model: str,
    usage: dict[str, object],
    kind: EventKind = EventKind.RESPONSE,
) -> None:
    rhash = "sha256:" + format(abs(hash(rid)), "x").rjust(64, "0")[:64]
    common = {"request_id": rid, "task": task, "caller": caller, "request_hash": rhash}
    store.append(EventDraft(kind=EventKind.REQUEST, data={"model_id": model}, **common))
    store.append(EventDraft(kind=kind, data={"ok": True, "model": model, "usage": usage}, **common))


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    with AuditStore.open(url, signer=signer) as store:
        _answer(
            store,
            "r1",
            caller="desk-a",
            task="kyc",
            model="claude-sonnet-4-6",
            usage={
                "input_tokens": 100,
                "output_tokens": 20,
                "cache_creation_input_tokens": 30,
                "cache_read_input_tokens": 400,
            },
        )
        _answer(
            store,
            "r2",
            caller="desk-a",
            task="kyc",
            model="local:ngram",
            usage={"input_tokens": 7, "output_tokens": 3},
        )
        _answer(
            store,
            "r3",
            caller="desk-b",
            task="aml",
            model="local:ngram",
            usage={"input_tokens": 5, "output_tokens": 5, "service_tier": "standard"},
        )
        # An answer that arrived before the caller left was billed: it counts.
        _answer(
            store,
            "r4",
            caller="desk-b",
            task="aml",
            model="local:ngram",
            usage={"input_tokens": 1, "output_tokens": 1},
            kind=EventKind.CANCELLED,
        )
        # A cache hit made no call; a rejected request neither.
        store.append(
            EventDraft(
                kind=EventKind.CACHE_HIT,
                request_id="r5",
                caller="desk-b",
                data={"usage": {"input_tokens": 999}},
            )
        )
    return url  # fmt: skip


def run(url: str, *args: str, catalog: Path | None = None) -> Result:
    env = {"GATEWAY_DATABASE_URL": url}
    if catalog is not None:
        env["GATEWAY_CATALOG_OVERRIDE"] = str(catalog)
    return CliRunner().invoke(main, list(args), env=env)


def test_usage_by_caller_sums_every_token_kind_and_marks_unpriced_usage(url: str) -> None:
    with Auditing.open(Settings(database_url=url)) as auditing:
        report = auditing.usage("caller")
    rows = {r.key: r for r in report.rows}
    a, b = rows["desk-a"], rows["desk-b"]
    assert (a.requests, a.input_tokens, a.output_tokens) == (2, 107, 23)
    assert (a.cache_write_tokens, a.cache_read_tokens) == (30, 400)
    # Claude has no sourced price in the catalog: that request is unpriced, never guessed.
    assert a.unpriced_requests == 1 and not a.priced and a.cost_usd == 0.0
    assert (b.requests, b.input_tokens, b.output_tokens) == (2, 6, 6)
    assert b.priced and b.cost_usd == 0.0  # the local model runs in-process: priced at 0
    assert report.total.requests == 4 and report.total.input_tokens == 113
    assert "2026-12-01" in report.price_sources["local:ngram"]["price_input"]


def test_usage_by_model_and_task_and_time_window(url: str) -> None:
    with Auditing.open(Settings(database_url=url)) as auditing:
        by_model = {r.key: r for r in auditing.usage("model").rows}
        by_task = {r.key: r for r in auditing.usage("task").rows}
        none = auditing.usage("task", EventFilter(until=datetime(2000, 1, 1, tzinfo=UTC)))
    assert by_model["claude-sonnet-4-6"].cost_usd is None
    assert by_model["local:ngram"].requests == 3
    assert set(by_task) == {"kyc", "aml"}
    assert none.rows == () and none.total.requests == 0


def test_cost_uses_each_price_per_million_tokens(url: str, tmp_path: Path) -> None:
    shipped = Catalog.load().get("claude-sonnet-4-6")
    assert shipped is not None
    override = tmp_path / "prices.toml"
    entry = shipped.model_dump(
        mode="json", exclude={"id", "sources", "retires_at", "transports"}, exclude_none=True
    )
    lines = [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    dated = "a price sheet read on 2026-12-01"
    sources = ", ".join(
        f'{f} = "{dated}"'
        for f in ("price_input", "price_output", "price_cache_write", "price_cache_read")
    )
    override.write_text(
        'schema = 1\n[models."claude-sonnet-4-6"]\n' + "\n".join(lines)
        + "\nprice_input = 3.0\nprice_output = 15.0\nprice_cache_write = 3.75\n"
        + f"price_cache_read = 0.3\nsources = {{ {sources} }}\n"
    )  # fmt: skip
    result = run(url, "audit", "usage", "--by", "model", "--format", "json", catalog=override)
    assert result.exit_code == 0, result.output
    rows = {r["key"]: r for r in json.loads(result.stdout)["rows"]}
    expected = (100 * 3.0 + 20 * 15.0 + 30 * 3.75 + 400 * 0.3) / 1_000_000
    assert rows["claude-sonnet-4-6"]["cost_usd"] == pytest.approx(expected)
    assert rows["claude-sonnet-4-6"]["unpriced_requests"] == 0


def test_a_price_without_a_dated_source_does_not_load(tmp_path: Path) -> None:
    override = tmp_path / "bad.toml"
    override.write_text(
        'schema = 1\n[models."x-model"]\nprovider = "local"\npinned = true\n'
        'api_version = "local-1"\nsampling = "all"\ntop_k = true\nmax_output_tokens = 10\n'
        'context_window = 10\nlifecycle = "active"\nprice_input = 1.0\n'
        'sources = { price_input = "somebody said so" }\n'
    )
    with pytest.raises(Exception, match="dated source"):
        Catalog.load(override)


def test_cli_table_csv_and_json(url: str) -> None:
    table = run(url, "audit", "usage", "--by", "caller")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split()[:2] == ["caller", "requests"]
    assert any(line.startswith("desk-a") and "+ 1 unpriced" in line for line in lines)
    assert any(line.startswith("desk-b") and line.endswith("$0.0000") for line in lines)
    assert "unpriced: no sourced price in the model catalog for claude-sonnet-4-6" in table.stdout
    rows = list(csv.DictReader(io.StringIO(run(url, "audit", "usage", "--by", "task",
                                                "--format", "csv").stdout)))  # fmt: skip
    assert [r["task"] for r in rows] == ["aml", "kyc", "total"]
    assert rows[1]["cost_usd"] == "0.0" and rows[1]["unpriced_requests"] == "1"
    data = json.loads(run(url, "audit", "usage", "--by", "model", "--format", "json").stdout)
    assert data["by"] == "model" and data["total"]["requests"] == 4


def test_an_empty_selection_says_so(url: str) -> None:
    result = run(url, "audit", "usage", "--by", "task", "--caller", "nobody")
    assert result.exit_code == 0
    assert "no recorded usage matches" in result.stderr


def test_usage_pages_through_the_log_rather_than_holding_it(url: str) -> None:
    # SQLite names each statement as it starts, with its values (its trace callback).
    statements: list[str] = []
    watching = threading.Event()

    def traced(statement: str) -> None:
        if watching.is_set():
            statements.append(statement)

    def connected(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(traced)

    sqlalchemy.event.listen(Engine, "connect", connected)
    try:
        with Auditing.open(Settings(database_url=url)) as auditing:
            watching.set()
            auditing.usage("caller")
            watching.clear()
    finally:
        sqlalchemy.event.remove(Engine, "connect", connected)
    reads = [s for s in statements if s.startswith("SELECT") and "FROM events" in s]
    # One streamed, kind-filtered read per outcome kind: the store pages, nothing is listed.
    kinds = [re.search(r"events\.kind = '(\w+)'", r) for r in reads]
    assert [k.group(1) if k else None for k in kinds] == [
        EventKind.RESPONSE,
        EventKind.CANCELLED,
        EventKind.REPLAY,  # a live replay's sends are spend too
    ]
    assert all(" LIMIT " in r for r in reads), reads
