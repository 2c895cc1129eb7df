"""Record authentication: an event appended without the record key is never served and fails
verify (docs/security.md, guarantee 11).

The attack: whoever can write the SQLite file, or holds the PostgreSQL application role, can
append a RESPONSE at head + 1 with a correct ``prev_hash`` and ``hash``, a new payload, and
the request hash of a real request. The hash chain cannot tell it from the gateway's own
events. The record signature can: the attacker has no record key.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, DefectKind, EventDraft, EventKind
from audit.canonical import canonical_bytes, digest
from audit.store.chain import link_hash
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.store.signing import Signer
from gateway import IntegrityAlert, Settings
from gateway.cli import main
from gateway.evidence import Auditing
from gateway.keys import RECORD_KEY_FILE
from tests.audit.conftest import Raw
from tests.gateway.conftest import MakeGateway
from tests.support.postgres import PostgresServer

QUESTION = "Transaction: EUR 9,500 cash deposit, third this week, customer account 4471."
FORGED_TEXT = "FORGED: no finding, approve the transfer."
ROW = (
    "seq, event_id, request_id, kind, recorded_at, task, caller, policy_fingerprint, "
    "request_hash, body, prev_hash, hash, signature, key_id"
)


def cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def _replace_text(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _replace_text(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_text(v, old, new) for v in value]
    return new if value == old else value


def forge_after_head(
    raw: Raw, url: str, template_seq: int, *, request_id: str | None = None, text: str = ""
) -> int:
    """Append a copy of event ``template_seq`` at head + 1 the way an attacker with write
    access can: correct link and hash, its own payload, the template's signature columns
    (the best it can do without the key). Returns the forged seq."""
    with AuditStore.open(url, create=False) as store:
        head_seq, head_hash = store.head()
        template = store.event(template_seq)
        payloads = dict(template.payload_digests)
        content = None
        if text and "response_body" in payloads:
            original = store.payload(payloads["response_body"])
            answer = json.loads(original)
            content = json.dumps(_replace_text(answer, text, FORGED_TEXT)).encode()
            assert content != original
            payloads["response_body"] = digest(content)
    body = json.loads(template.body)
    body.update(seq=head_seq + 1, event_id=uuid.uuid4().hex, payloads=payloads)
    if request_id is not None:
        body["request_id"] = request_id
    forged = canonical_bytes(body)
    if content is not None:
        raw.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (?, ?, ?)",
            (payloads["response_body"], len(content), content),
        )
    recorded_at = raw.execute("SELECT recorded_at FROM events WHERE seq = ?", (template_seq,))
    marks = ", ".join("?" for _ in range(14))
    raw.execute(
        f"INSERT INTO events ({ROW}) VALUES ({marks})",
        (
            head_seq + 1, body["event_id"], body["request_id"], template.kind.value,
            recorded_at[0][0], template.task, template.caller, template.policy_fingerprint,
            template.request_hash, forged, head_hash, link_hash(head_hash, forged),
            template.signature, template.key_id,
        ),
    )  # fmt: skip
    return head_seq + 1


def _response_seq(url: str, request_id: str) -> int:
    with AuditStore.open(url, create=False) as store:
        events = store.events_for_request(request_id)
    return next(e.seq for e in events if e.kind == EventKind.RESPONSE)


def _alerts(url: str) -> list[dict[str, Any]]:
    with AuditStore.open(url, create=False) as store:
        return [e.data for e in store.iter_events(kind=EventKind.INTEGRITY_ALERT)]


def _assert_refused_and_named(
    make_gateway: MakeGateway, url: str, forged: int, env: dict[str, str], **settings: Any
) -> None:
    # (a) A new gateway process asking the same question is not served the forged answer.
    with pytest.raises(IntegrityAlert, match=f"seq {forged}"):
        make_gateway(offline=True, **settings).complete(
            "compliance_review", QUESTION, caller="desk"
        )
    assert [a["served_seq"] for a in _alerts(url)] == [forged]
    # (b) The auditor's verify names it, by seq, as signed by no trusted key.
    verified = cli(env, "audit", "verify", "--format", "json")
    assert verified.exit_code == 1, verified.output
    report = json.loads(verified.stdout)
    assert report["signatures_checked"] is True and report["trusted_keys"]
    kinds = {d["kind"] for d in report["defects"] if d["seq"] == forged}
    assert DefectKind.BAD_SIGNATURE.value in kinds, report["defects"]


def test_a_forged_response_at_the_head_is_not_served_and_verify_names_it(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    url = f"sqlite:///{db_path}"
    first = make_gateway(offline=True).complete("compliance_review", QUESTION, caller="desk")
    raw = Raw(url)
    try:
        raw.unguard()  # whoever has the file can drop the triggers
        forged = forge_after_head(raw, url, _response_seq(url, first.request_id), text=first.text)
    finally:
        raw.close()
    _assert_refused_and_named(make_gateway, url, forged, {"GATEWAY_DATABASE_URL": url})
    report = json.loads(cli({"GATEWAY_DATABASE_URL": url}, "audit", "verify", "--format",
                             "json").stdout)  # fmt: skip
    kinds = {d["kind"] for d in report["defects"] if d["seq"] == forged}
    assert DefectKind.DUPLICATE_OUTCOME.value in kinds  # the request had already ended


def test_a_forged_request_and_response_pair_is_caught_by_the_signature_alone(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    """A whole forged life (REQUEST then RESPONSE under a new request id) fits together; only
    the missing record key gives it away."""
    url = f"sqlite:///{db_path}"
    first = make_gateway(offline=True).complete("compliance_review", QUESTION, caller="desk")
    with AuditStore.open(url, create=False) as store:
        request_seq = store.events_for_request(first.request_id)[0].seq
    raw = Raw(url)
    try:
        raw.unguard()
        forge_after_head(raw, url, request_seq, request_id="req_forged")
        forged = forge_after_head(
            raw, url, _response_seq(url, first.request_id), request_id="req_forged",
            text=first.text,
        )  # fmt: skip
    finally:
        raw.close()
    _assert_refused_and_named(make_gateway, url, forged, {"GATEWAY_DATABASE_URL": url})
    report = json.loads(cli({"GATEWAY_DATABASE_URL": url}, "audit", "verify", "--format",
                             "json").stdout)  # fmt: skip
    lifecycle = {DefectKind.ORPHAN_OUTCOME.value, DefectKind.DUPLICATE_OUTCOME.value}
    assert not lifecycle & {d["kind"] for d in report["defects"]}


@pytest.mark.postgres
def test_a_forged_response_by_the_app_role_is_not_served_and_verify_names_it(
    make_gateway: MakeGateway, postgres_server: PostgresServer, pg_url: str
) -> None:
    """The application role can INSERT well-linked rows (the chain guard of 0005 checks
    links, hashes and columns, which the forgery gets right); it has no record key."""
    upgrade(pg_url)
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'gateway_app'").fetchone() is None:
            conn.execute("CREATE ROLE gateway_app LOGIN")
    grant(pg_url, "gateway_app")
    app_url = postgres_server.url(pg_url.rsplit("/", 1)[1], "gateway_app")
    key = Signer.generate()
    first = make_gateway(offline=True, database_url=app_url, record_key=key.seed_hex()).complete(
        "compliance_review", QUESTION, caller="desk"
    )
    raw = Raw(app_url)  # the app role's own connection: no trigger is switched off
    try:
        forged = forge_after_head(
            raw, app_url, _response_seq(app_url, first.request_id), text=first.text
        )
    finally:
        raw.close()
    # The auditor holds only the public key.
    env = {"GATEWAY_DATABASE_URL": app_url, "GATEWAY_TRUSTED_KEYS": key.public_key}
    _assert_refused_and_named(
        make_gateway, app_url, forged, env, database_url=app_url, record_key=key.seed_hex()
    )


def _mixed_log(url: str) -> Signer:
    """Two events written before signing existed, then two signed ones."""
    with AuditStore.open(url) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="old"))
        store.append(EventDraft(kind=EventKind.RESPONSE, request_id="old"))
    signer = Signer.generate()
    with AuditStore.open(url, signer=signer) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="new"))
        store.append(EventDraft(kind=EventKind.RESPONSE, request_id="new"))
    return signer


def test_unsigned_legacy_events_are_defects_unless_the_log_is_said_to_predate_signing(
    sqlite_url: str,
) -> None:
    signer = _mixed_log(sqlite_url)
    settings = Settings(database_url=sqlite_url, record_key=signer.seed_hex())
    with Auditing.open(settings) as auditing:
        strict = auditing.verify()
        legacy = auditing.verify(allow_unsigned_before=3)
        too_early = auditing.verify(allow_unsigned_before=2)
    assert [(d.seq, d.kind) for d in strict.defects] == [
        (1, DefectKind.UNSIGNED),
        (2, DefectKind.UNSIGNED),
    ]
    assert legacy.ok and legacy.unsigned_allowed == 2 and legacy.unsigned_allowed_before == 3
    assert [d.seq for d in too_early.defects] == [2]
    env = {"GATEWAY_DATABASE_URL": sqlite_url, "GATEWAY_RECORD_KEY": signer.seed_hex()}
    shown = cli(env, "audit", "verify", "--allow-unsigned-before", "3")
    assert shown.exit_code == 0, shown.output
    assert "unsigned events below seq 3 accepted" in shown.output and signer.key_id in shown.output


def test_verify_trusts_only_the_keys_it_is_given_and_says_which(
    sqlite_url: str, tmp_path: Path
) -> None:
    signer = Signer.generate()
    with AuditStore.open(sqlite_url, signer=signer) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r"))
    other = Signer.generate()
    env = {"GATEWAY_DATABASE_URL": sqlite_url, "GATEWAY_RECORD_KEY": other.seed_hex()}
    refused = cli(env, "audit", "verify", "--format", "json")
    assert refused.exit_code == 1
    report = json.loads(refused.stdout)
    assert [k["key_id"] for k in report["trusted_keys"]] == [other.key_id]
    assert report["defects"][0]["kind"] == DefectKind.UNTRUSTED_SIGNER.value
    assert signer.key_id in report["defects"][0]["detail"]

    public = tmp_path / "gateway-record.pub"
    public.write_text(f"# the gateway's record key\n{signer.public_key}\n")
    accepted = cli(env, "audit", "verify", "--public-key", str(public))
    assert accepted.exit_code == 0, accepted.output
    assert signer.key_id in accepted.output and other.key_id in accepted.output


def test_the_record_key_is_a_file_beside_the_database_and_never_in_it(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    make_gateway(offline=True).complete("compliance_review", QUESTION, caller="desk")
    key_file = db_path.parent / RECORD_KEY_FILE
    assert key_file.stat().st_mode & 0o777 == 0o600
    seed = key_file.read_text().strip()
    signer = Signer.from_text(seed)
    stored = b"".join(
        Path(f"{db_path}{suffix}").read_bytes()
        for suffix in ("", "-wal")
        if Path(f"{db_path}{suffix}").exists()
    )
    assert seed.encode() not in stored and bytes.fromhex(seed) not in stored
    with AuditStore.open(f"sqlite:///{db_path}", create=False) as store:
        assert {e.key_id for e in store.iter_events()} == {signer.key_id}


def test_postgres_without_a_record_key_refuses_to_write(pg_url: str, tmp_path: Path) -> None:
    upgrade(pg_url)
    from gateway import ConfigurationError
    from gateway.request import Recorder

    with pytest.raises(ConfigurationError, match="no record key"):
        Recorder.open(Settings(database_url=pg_url))


test_postgres_without_a_record_key_refuses_to_write = pytest.mark.postgres(
    test_postgres_without_a_record_key_refuses_to_write
)


# -- checkpoints: the signer must be pinned -------------------------------------------------

CHECKPOINT_KEY = "33" * 32


def _checkpointed(url: str, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    signer = Signer.generate()
    with AuditStore.open(url, signer=signer) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r"))
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_RECORD_KEY": signer.seed_hex()}
    head = tmp_path / "head.json"
    made = cli({**env, "GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY}, "audit", "checkpoint", "-o",
               str(head))  # fmt: skip
    assert made.exit_code == 0, made.output
    return head, env


def test_a_checkpoint_whose_signer_is_not_pinned_is_refused(
    sqlite_url: str, tmp_path: Path
) -> None:
    head, env = _checkpointed(sqlite_url, tmp_path)
    refused = cli(env, "audit", "verify", "--checkpoint", str(head))
    assert refused.exit_code == 2, refused.output
    assert "another key" in refused.stderr and "--unsafe-accept-unpinned-checkpoint" in (
        refused.stderr
    )
    # Pinned by the operator's key, or by the public key handed to the auditor.
    pinned = cli({**env, "GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY}, "audit", "verify",
                 "--checkpoint", str(head))  # fmt: skip
    assert pinned.exit_code == 0, pinned.output
    public = tmp_path / "checkpoint.pub"
    public.write_text(json.loads(head.read_text())["public_key"] + "\n")
    by_file = cli(env, "audit", "verify", "--checkpoint", str(head), "--public-key", str(public))
    assert by_file.exit_code == 0, by_file.output
    assert "checkpoint signed by trusted key" in by_file.output


def test_the_unsafe_flag_accepts_an_unpinned_checkpoint_and_says_so(
    sqlite_url: str, tmp_path: Path
) -> None:
    head, env = _checkpointed(sqlite_url, tmp_path)
    flag = "--unsafe-accept-unpinned-checkpoint"
    text = cli(env, "audit", "verify", "--checkpoint", str(head), flag)
    assert text.exit_code == 0, text.output
    assert "WARNING" in text.stderr and "NOT a trusted key" in text.stderr
    assert "NOT a trusted key" in text.stdout
    as_json = cli(env, "audit", "verify", "--checkpoint", str(head), flag, "--format", "json")
    report = json.loads(as_json.stdout)
    assert report["checkpoint_pinned"] is False
    assert report["checkpoint_signer"] == json.loads(head.read_text())["public_key"]


def test_an_unsigned_checkpoint_is_refused_without_the_unsafe_flag(
    sqlite_url: str, tmp_path: Path
) -> None:
    signer = Signer.generate()
    with AuditStore.open(sqlite_url, signer=signer) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r"))
    env = {"GATEWAY_DATABASE_URL": sqlite_url, "GATEWAY_RECORD_KEY": signer.seed_hex()}
    head = tmp_path / "head.json"
    assert cli(env, "audit", "checkpoint", "--unsigned", "-o", str(head)).exit_code == 0
    refused = cli(env, "audit", "verify", "--checkpoint", str(head))
    assert refused.exit_code == 2 and "not signed" in refused.stderr


# -- read-only commands create nothing --------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("audit", "verify"),
        ("audit", "list"),
        ("audit", "show", "req_x"),
        ("audit", "export"),
        ("audit", "checkpoint", "--unsigned"),
        ("replay", "--verify"),
    ],
)
def test_a_mistyped_database_path_is_an_error_and_creates_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    missing = tmp_path / "gateway-audti.db"
    result = cli({"GATEWAY_DATABASE_URL": f"sqlite:///{missing}"}, *args)
    assert result.exit_code == 4, result.output
    assert f"no audit database at '{missing}'" in result.stderr
    assert "intact" not in result.output
    assert sorted(os.listdir(tmp_path)) == []  # no database, no key file
