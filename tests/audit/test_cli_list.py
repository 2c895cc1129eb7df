"""`gateway audit list` for an auditor: every outcome named, model/tokens/latency, the
derivation label, and a footer whenever rows were left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from gateway import Settings
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.keys import record_signer

RESPONSE_DATA = {
    "ok": True,
    "model": "claude-sonnet-4-6",
    "latency_ms": 812.5,
    "usage": {"input_tokens": 40, "output_tokens": 12},
}


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    with AuditStore.open(url, signer=signer) as store:

        def request(rid: str, outcome: EventKind | None, data: dict[str, object]) -> None:
            rhash = "sha256:" + rid[-1] * 64
            store.append(
                EventDraft(
                    kind=EventKind.REQUEST, request_id=rid, task="compliance_review",
                    caller="svc", request_hash=rhash,
                    data={"model_id": "claude-sonnet-4-6",
                          **({"derived": {"label": "experiment:hot",
                                          "reviewed_fingerprint": "sha256:" + "0" * 64}}
                             if rid == "r-exp1" else {})},
                )
            )  # fmt: skip
            if outcome is not None:
                store.append(
                    EventDraft(
                        kind=outcome, request_id=rid, task="compliance_review", caller="svc",
                        request_hash=rhash, data=data,
                    )
                )  # fmt: skip

        request("r-good1", EventKind.RESPONSE, RESPONSE_DATA)
        request("r-bad2", EventKind.RESPONSE, {**RESPONSE_DATA, "ok": False})
        request("r-gone3", EventKind.CANCELLED, {"reason": "closed", "answered": False})
        request("r-exp1", EventKind.RESPONSE, RESPONSE_DATA)
        store.append(
            EventDraft(
                kind=EventKind.INTEGRITY_ALERT, request_id="r-alert", task="compliance_review",
                caller="svc", data={"served_seq": 1, "check": "served_answer", "problems": ["x"]},
            )
        )  # fmt: skip
    return url


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": url})


def entry(lines: list[str], request_id: str) -> tuple[str, str]:
    """The two lines of one request's entry in the table: the first names its id."""
    at = next(n for n, x in enumerate(lines) if x.endswith(f"  {request_id}"))
    return lines[at], lines[at + 1]


def test_every_outcome_has_its_own_status(url: str) -> None:
    rows = json.loads(run(url, "audit", "list", "--format", "json").stdout)
    assert {r["request_id"]: r["status"] for r in rows} == {
        "r-good1": "completed",
        "r-bad2": "flagged",
        "r-gone3": "cancelled",
        "r-exp1": "completed",
        "r-alert": "integrity alert",
    }


def test_rows_carry_model_tokens_latency_and_label(url: str) -> None:
    rows = {r["request_id"]: r for r in json.loads(run(url, "audit", "list", "--format",
                                                       "json").stdout)}  # fmt: skip
    good = rows["r-good1"]
    assert good["model"] == "claude-sonnet-4-6"
    assert (good["input_tokens"], good["output_tokens"], good["latency_ms"]) == (40, 12, 812.5)
    assert rows["r-exp1"]["label"] == "experiment:hot"
    assert rows["r-gone3"]["input_tokens"] is None
    table = run(url, "audit", "list").stdout.splitlines()
    first, second = entry(table, "r-good1")
    assert "claude-sonnet-4-6" in first and "40/12" in second and "812 ms" in second
    assert "1-2" in first  # first and last seq of the request
    at = table.index(entry(table, "r-exp1")[0])
    assert "label experiment:hot" in table[at + 2]


def test_a_cut_listing_says_how_much_was_left_out(url: str) -> None:
    table = run(url, "audit", "list", "--limit", "2").stdout.splitlines()
    assert table[-1] == "2 of 5 (use --limit N or --all)"
    # Two header lines, two lines a request, and a third for r-exp1's label (an experiment's).
    assert len(table) == 2 + 2 * 2 + 1 + 1
    everything = run(url, "audit", "list", "--all").stdout.splitlines()
    assert len(everything) == 2 + 5 * 2 + 1 and "of" not in everything[-1].split()[:2]
    jsonl = run(url, "audit", "list", "--limit", "2", "--format", "jsonl").stdout.splitlines()
    assert len(jsonl) == 2  # machine formats carry rows only
    assert len(json.loads(run(url, "audit", "list", "--all", "--format", "json").stdout)) == 5


# -- estimated cost ---------------------------------------------------------------------------

PRICES = {"price_input": 3.0, "price_output": 15.0, "price_cache_write": 3.75,
          "price_cache_read": 0.3}  # fmt: skip
CACHED_USAGE = {
    "input_tokens": 100,
    "output_tokens": 20,
    "cache_creation_input_tokens": 30,
    "cache_read_input_tokens": 400,
}


def _priced_catalog(tmp_path: Path) -> Path:
    """A catalog override that prices claude-sonnet-4-6 (the shipped catalog prices no Claude
    model), each price with a dated source."""
    shipped = Catalog.load().get("claude-sonnet-4-6")
    assert shipped is not None
    entry = shipped.model_dump(
        mode="json", exclude={"id", "sources", "retires_at", "transports"}, exclude_none=True
    )
    lines = [f"{k} = {json.dumps(v)}" for k, v in {**entry, **PRICES}.items()]
    sources = ", ".join(f'{f} = "a price sheet read on 2026-12-01"' for f in PRICES)
    override = tmp_path / "prices.toml"
    override.write_text(
        'schema = 1\n[models."claude-sonnet-4-6"]\n' + "\n".join(lines)
        + f"\nsources = {{ {sources} }}\n"
    )  # fmt: skip
    return override


@pytest.fixture
def cost_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'costs.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    with AuditStore.open(url, signer=signer) as store:

        def request(rid: str, model: str, outcome: EventKind, data: dict[str, object]) -> None:
            common = {"request_id": rid, "task": "kyc", "caller": "svc",
                      "request_hash": "sha256:" + rid[-1] * 64}  # fmt: skip
            store.append(EventDraft(kind=EventKind.REQUEST, data={"model_id": model}, **common))
            store.append(EventDraft(kind=outcome, data=data, **common))

        answer = {"ok": True, "model": "claude-sonnet-4-6", "usage": CACHED_USAGE}
        request("r-claude1", "claude-sonnet-4-6", EventKind.RESPONSE, answer)
        local = {"ok": True, "model": "local:ngram", "usage": {"input_tokens": 7,
                                                             "output_tokens": 3}}  # fmt: skip
        request("r-local2", "local:ngram", EventKind.RESPONSE, local)
        request("r-hit3", "claude-sonnet-4-6", EventKind.CACHE_HIT, {"served_seq": 2})
        request("r-reject4", "claude-sonnet-4-6", EventKind.REJECTED, {"key": "tools"})
    return url


def _listed(url: str, catalog: Path | None = None, *args: str) -> Result:
    env = {"GATEWAY_DATABASE_URL": url}
    if catalog is not None:
        env["GATEWAY_CATALOG_OVERRIDE"] = str(catalog)
    return CliRunner().invoke(main, ["audit", "list", *args], env=env)


def test_rows_carry_the_estimated_cost_with_cache_tokens_priced_apart(
    cost_url: str, tmp_path: Path
) -> None:
    catalog = _priced_catalog(tmp_path)
    rows = {r["request_id"]: r for r in json.loads(_listed(cost_url, catalog, "--format",
                                                           "json").stdout)}  # fmt: skip
    claude = rows["r-claude1"]
    assert (claude["cache_write_tokens"], claude["cache_read_tokens"]) == (30, 400)
    expected = (100 * 3.0 + 20 * 15.0 + 30 * 3.75 + 400 * 0.3) / 1_000_000
    assert claude["cost_usd"] == pytest.approx(expected)
    assert rows["r-local2"]["cost_usd"] == 0.0  # priced, at 0: it runs in-process
    # No upstream call recorded no usage: no cost figure, not a 0 nobody priced.
    assert rows["r-hit3"]["cost_usd"] is None
    assert rows["r-reject4"]["cost_usd"] is None
    jsonl = [
        json.loads(x) for x in _listed(cost_url, catalog, "--format", "jsonl").stdout.splitlines()
    ]
    assert {r["request_id"]: r["cost_usd"] for r in jsonl} == {
        rid: r["cost_usd"] for rid, r in rows.items()
    }
    table = _listed(cost_url, catalog).stdout.splitlines()
    assert "cost (USD)" in table[1]
    assert f"${expected:,.4f}" in entry(table, "r-claude1")[1]
    assert "$0.0000" in entry(table, "r-local2")[1]


def test_an_unpriced_model_shows_no_cost_never_zero(cost_url: str) -> None:
    rows = {r["request_id"]: r for r in json.loads(_listed(cost_url, None, "--format",
                                                           "json").stdout)}  # fmt: skip
    assert rows["r-claude1"]["cost_usd"] is None  # the shipped catalog prices no Claude model
    assert rows["r-claude1"]["input_tokens"] == 100  # its usage is still shown
    table = _listed(cost_url).stdout.splitlines()
    start = table[1].index("cost (USD)")
    line = entry(table, "r-claude1")[1]
    assert line[start : start + len("cost (USD)")].strip() == "-"


def test_the_table_shows_each_requests_policy_version(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fp.db'}"
    versions = {"r-old1": "sha256:" + "ab" * 32, "r-new2": "sha256:" + "cd" * 32}
    with AuditStore.open(url) as store:
        for rid, fingerprint in versions.items():
            store.append(
                EventDraft(
                    kind=EventKind.REQUEST, request_id=rid, task="kyc", caller="svc",
                    policy_fingerprint=fingerprint,
                )
            )  # fmt: skip
    table = run(url, "audit", "list").stdout.splitlines()
    start = table[1].index("policy")
    for rid, fingerprint in versions.items():
        line = entry(table, rid)[1]
        assert line[start : start + 12] == fingerprint.removeprefix("sha256:")[:12]
