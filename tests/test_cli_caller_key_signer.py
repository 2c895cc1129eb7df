"""`gateway keys create` refuses a caller key that the servers would not trust: one signed
by a record key other than the keys the servers sign their requests with (every request
with it was a 401 "unknown or revoked", the cause only in the server's log)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from audit.store.signing import Signer
from gateway.cli import main

SERVER_KEY = "22" * 32
ADMIN_KEY = "33" * 32


def _keys_create(url: str, record_key: str, *extra: str) -> Result:
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_RECORD_KEY": record_key}
    args = ["keys", "create", "--caller", "payments-svc", "--format", "json", *extra]
    return CliRunner().invoke(main, args, env=env)


def _served_log(tmp_path: Path) -> str:
    tmp_path.mkdir(exist_ok=True)
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url, signer=Signer.from_text(SERVER_KEY)) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r-1", caller="svc"))
    return url


def test_a_caller_key_under_a_record_key_the_servers_do_not_use_is_refused(
    tmp_path: Path,
) -> None:
    url = _served_log(tmp_path)
    refused = _keys_create(url, ADMIN_KEY)
    assert refused.exit_code == 2, refused.output
    server_id = Signer.from_text(SERVER_KEY).key_id
    admin_id = Signer.from_text(ADMIN_KEY).key_id
    assert admin_id in refused.stderr and server_id in refused.stderr
    assert "GATEWAY_TRUSTED_KEYS" in refused.stderr and "--signer-trusted" in refused.stderr
    assert "gwk_" not in refused.output  # no key was printed
    with AuditStore.open(url, create=False) as store:
        assert not list(store.iter_events(kind=EventKind.CALLER_KEY))


def test_the_servers_own_key_or_an_explicit_trust_issues_the_key(tmp_path: Path) -> None:
    url = _served_log(tmp_path)
    same = _keys_create(url, SERVER_KEY)
    assert same.exit_code == 0, same.output
    assert json.loads(same.stdout)["key"].startswith("gwk_")
    trusted = _keys_create(url, ADMIN_KEY, "--signer-trusted")
    assert trusted.exit_code == 0, trusted.output


def test_on_a_log_with_no_request_it_says_the_signer_could_not_be_checked(
    tmp_path: Path,
) -> None:
    """An empty log says nothing about the servers' record keys: the key is issued, and the
    command says plainly that it could not check them (it used to say nothing)."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    issued = _keys_create(url, ADMIN_KEY)
    assert issued.exit_code == 0, issued.output
    body = json.loads(issued.stdout)
    assert body["signer_checked"] is False
    assert body["signed_by"] == Signer.from_text(ADMIN_KEY).key_id
    assert "cannot be checked" in issued.stderr
    assert Signer.from_text(ADMIN_KEY).key_id in issued.stderr
    assert "GATEWAY_TRUSTED_KEYS" in issued.stderr
    checked = _keys_create(_served_log(tmp_path / "served"), SERVER_KEY)
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["signer_checked"] is True
    assert "cannot be checked" not in checked.stderr
