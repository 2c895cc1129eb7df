"""A prices-only catalog override: `[prices."<id>"]` sets a model's prices, each with its dated
source, and changes nothing else, so a bank adds its contract prices without copying (and
then keeping up) a whole catalog entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventDraft, EventKind
from gateway import Settings
from gateway.catalog import Catalog
from gateway.catalog._loader import CatalogError
from gateway.cli import main
from gateway.keys import record_signer

PRICES = """\
schema = 1
[prices."claude-sonnet-4-6"]
price_input = 3.0
price_output = 15.0
source = "Contract schedule B, read 2026-12-01"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_prices_only_set_the_prices_and_their_source(tmp_path: Path) -> None:
    shipped = Catalog.load().get("claude-sonnet-4-6")
    priced = Catalog.load(_write(tmp_path, PRICES)).get("claude-sonnet-4-6")
    assert shipped is not None and priced is not None
    assert (priced.price_input, priced.price_output) == (3.0, 15.0)
    assert priced.price_cache_read is None  # not given: still unpriced
    assert priced.sources["price_input"] == "Contract schedule B, read 2026-12-01"
    unchanged = {"price_input", "price_output", "sources"}
    assert priced.model_dump(exclude=unchanged) == shipped.model_dump(exclude=unchanged)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (PRICES.replace("claude-sonnet-4-6", "claude-nonesuch-9"), "names no model"),
        (PRICES.replace("price_output = 15.0", "max_output_tokens = 9"), "not prices"),
        (PRICES.replace('source = "Contract schedule B, read 2026-12-01"', ""), "no source"),
        (PRICES.replace("read 2026-12-01", "read lately"), "date"),
    ],
)
def test_a_bad_prices_table_is_refused_in_one_line(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(CatalogError) as refused:
        Catalog.load(_write(tmp_path, text))
    assert says in str(refused.value)


def test_audit_usage_prices_with_a_prices_only_override(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    common = {"request_id": "r-1", "task": "kyc", "caller": "svc"}
    with AuditStore.open(url, signer=signer) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, data={"model_id": "claude-sonnet-4-6"},
                                **common))  # fmt: skip
        usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
        store.append(EventDraft(kind=EventKind.RESPONSE, data={"ok": True, "usage": usage,
                                "model": "claude-sonnet-4-6"}, **common))  # fmt: skip
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_CATALOG_OVERRIDE": str(_write(tmp_path, PRICES))}
    out = CliRunner().invoke(main, ["audit", "usage", "--by", "model"], env=env)
    assert out.exit_code == 0, out.output
    assert "$18.0000" in out.output
