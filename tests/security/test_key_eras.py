"""Invariant 12: a record key is trusted only for its era (docs/security.md, "Rotating the key").

The attack: the operator rotates to a new record key and, as the docs say, keeps the old public
key trusted for the old key's events. A writer that still holds the old key (an old host, a
backup) appends a REQUEST and a RESPONSE signed with it. Trust in a public key alone has no
end, so the gateway served that answer from the cache and verify said intact. A rotation is
now an event on the record (`gateway keys rotate-record`): from its seq on, the old key signs
nothing that verify or the read path accepts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, DefectKind, EventKind
from audit.store.migrate import upgrade
from audit.store.signing import Signer
from gateway import ConfigurationError, IntegrityAlert, Settings
from gateway.callers import CallerKeys, KeyRing
from gateway.cli import main
from tests.gateway.conftest import MakeGateway
from tests.support.postgres import PostgresServer

OLD_KEY = Signer.from_text("a1" * 32)
NEW_KEY = Signer.from_text("b2" * 32)
INTEGRATOR_KEY = "5f" * 32
BEFORE = "Transaction: EUR 9,500 cash deposit, third this week, customer account 4471."
AFTER = "Transaction: EUR 48,000 wire to a new beneficiary, customer account 9120."


def cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def _responses(url: str, request_id: str) -> list[int]:
    with AuditStore.open(url, create=False) as store:
        return [e.seq for e in store.events_for_request(request_id)]


def _attack(make_gateway: MakeGateway, url: str, **settings: Any) -> None:
    new_env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_RECORD_KEY": NEW_KEY.seed_hex(),
        "GATEWAY_TRUSTED_KEYS": OLD_KEY.public_key,
        **({"GATEWAY_AUDIT_FORMAT": "2"} if settings.get("audit_format") == 2 else {}),
    }
    old = make_gateway(offline=True, database_url=url, record_key=OLD_KEY.seed_hex(), **settings)
    before = old.complete("compliance_review", BEFORE, caller="desk")

    # The operator rotates: the new key configured, the old public key still trusted.
    rotated = cli(new_env, "keys", "rotate-record", "--retire", OLD_KEY.key_id, "--format", "json")
    assert rotated.exit_code == 0, rotated.output
    rotation = json.loads(rotated.stdout)
    assert rotation["retired_key_id"] == OLD_KEY.key_id and rotation["key_id"] == NEW_KEY.key_id

    # A writer that still holds the old key (an old host, running since before the rotation)
    # appends a whole life after it.
    forged = old.complete("compliance_review", AFTER, caller="desk")
    forged_seqs = _responses(url, forged.request_id)
    assert min(forged_seqs) > rotation["seq"]

    # The rotated gateway: the old key's earlier answer is still served ...
    new = make_gateway(
        offline=True,
        database_url=url,
        record_key=NEW_KEY.seed_hex(),
        trusted_keys=(OLD_KEY.public_key,),
        **settings,
    )
    again = new.complete("compliance_review", BEFORE, caller="desk")
    assert again.cached and again.text == before.text
    # ... the answer the old key signed after its retirement is not.
    with pytest.raises(IntegrityAlert, match=f"{OLD_KEY.key_id}.*retired") as alert:
        new.complete("compliance_review", AFTER, caller="desk")
    assert f"seq {forged_seqs[-1]}" in str(alert.value)

    if settings.get("audit_format") == 2:
        integrated = cli(
            {**new_env, "GATEWAY_INTEGRATOR_KEY": INTEGRATOR_KEY},
            "audit", "integrate", "--once",
        )  # fmt: skip
        assert integrated.exit_code == 0, integrated.output
        new_env["GATEWAY_INTEGRATOR_PUBLIC_KEYS"] = Signer.from_text(INTEGRATOR_KEY).public_key
    verified = cli(new_env, "audit", "verify", "--format", "json")
    assert verified.exit_code == 1, verified.output
    report = json.loads(verified.stdout)
    retired = [d for d in report["defects"] if d["kind"] == DefectKind.RETIRED_KEY.value]
    assert [d["seq"] for d in retired] == forged_seqs, report["defects"]
    assert all(OLD_KEY.key_id in d["detail"] for d in retired)
    assert {d["kind"] for d in report["defects"]} == {DefectKind.RETIRED_KEY.value}, report


def test_a_retired_key_signs_nothing_after_its_rotation(
    make_gateway: MakeGateway, tmp_path: Path
) -> None:
    _attack(make_gateway, f"sqlite:///{tmp_path / 'audit.db'}")


@pytest.mark.postgres
@pytest.mark.parametrize("audit_format", [1, 2])
def test_a_retired_key_signs_nothing_after_its_rotation_on_postgresql(
    make_gateway: MakeGateway, postgres_server: PostgresServer, pg_url: str, audit_format: int
) -> None:
    upgrade(pg_url)
    _attack(make_gateway, pg_url, audit_format=audit_format)


def _rotate(url: str, *args: str, key: Signer = NEW_KEY, trusted: str = "") -> Result:
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_RECORD_KEY": key.seed_hex(),
        "GATEWAY_TRUSTED_KEYS": trusted or OLD_KEY.public_key,
    }
    return cli(env, "keys", "rotate-record", *args)


def test_rotation_mistakes_are_one_line_errors(make_gateway: MakeGateway, db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    make_gateway(offline=True, record_key=OLD_KEY.seed_hex()).complete(
        "compliance_review", BEFORE, caller="desk"
    )
    unknown = _rotate(url, "--retire", "ed25519:0000000000000000")
    assert unknown.exit_code != 0 and "not one of the trusted record keys" in unknown.output
    own = _rotate(url, "--retire", NEW_KEY.key_id)
    assert own.exit_code != 0 and "own record key" in own.output
    assert _rotate(url, "--retire", OLD_KEY.public_key).exit_code == 0
    twice = _rotate(url, "--retire", OLD_KEY.key_id)
    assert twice.exit_code != 0 and "already retired" in twice.output
    # The retired key cannot rotate back: its rotation would be signed outside its era.
    back = _rotate(url, "--retire", NEW_KEY.key_id, key=OLD_KEY, trusted=NEW_KEY.public_key)
    assert back.exit_code != 0 and "was itself retired" in back.output
    for result in (unknown, own, twice, back):
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 2
    with AuditStore.open(url, create=False) as store:
        assert len(list(store.iter_events(kind=EventKind.KEY_ROTATION))) == 1


def test_a_caller_key_issued_with_a_retired_key_is_not_accepted(
    make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    """The retired key's holder issues itself a `gateway serve` caller key: the server's key
    ring trusts key events only in their signer's era."""
    url = f"sqlite:///{db_path}"
    make_gateway(offline=True, record_key=OLD_KEY.seed_hex()).complete(
        "compliance_review", BEFORE, caller="desk"
    )
    assert _rotate(url, "--retire", OLD_KEY.key_id).exit_code == 0
    base = {"policy_dir": policy_dir, "database_url": url, "durability": "os"}
    with CallerKeys.open(Settings(**base, record_key=OLD_KEY.seed_hex())) as old:
        issued = old.create("intruder")
    new = Settings(**base, record_key=NEW_KEY.seed_hex(), trusted_keys=(OLD_KEY.public_key,))
    with CallerKeys.open(new, create=False) as keys:
        ring = KeyRing(keys)
        ring.refresh()
        assert ring.authenticate(issued.key) is None
        assert issued.key_id not in {k.key_id for k in keys.list()}


def test_a_gateway_with_a_retired_record_key_does_not_start(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    url = f"sqlite:///{db_path}"
    make_gateway(offline=True, record_key=OLD_KEY.seed_hex()).complete(
        "compliance_review", BEFORE, caller="desk"
    )
    assert _rotate(url, "--retire", OLD_KEY.key_id).exit_code == 0
    with AuditStore.open(url, create=False) as store:
        events = store.head()
    # An old host restarted with the retired key (and the deployment's trusted keys, which
    # name the new one): it would write events every reader refuses.
    with pytest.raises(ConfigurationError, match=f"record key {OLD_KEY.key_id} was retired"):
        make_gateway(
            offline=True, record_key=OLD_KEY.seed_hex(), trusted_keys=(NEW_KEY.public_key,)
        )
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_RECORD_KEY": OLD_KEY.seed_hex(),
        "GATEWAY_TRUSTED_KEYS": NEW_KEY.public_key,
    }
    refused = cli(env, "ask", "--offline", "compliance_review", BEFORE)
    assert refused.exit_code == 2 and "Traceback" not in refused.output, refused.output
    assert "was retired" in refused.output
    with AuditStore.open(url, create=False) as store:
        assert store.head() == events  # nothing written by the refused starts
