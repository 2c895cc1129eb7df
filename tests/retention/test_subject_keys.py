"""Subject tags across a cache-key rotation: each tag records the id of the key that made it,
erasure and holds look under every key of the ring (the current key and
``previous_cache_keys_file``), and a lost key file is an error, never a silent new key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventKind
from gateway import ConfigurationError, ErasureRefused, Gateway, Settings
from gateway.cli import main
from gateway.evidence import Erasing
from gateway.keys import CACHE_KEY_FILE, CacheKey
from tests.gateway.conftest import MakeGateway

SUBJECT = "customer-118204"
NEW_KEY = "22" * 32


def _request(settings: Settings, request_id: str) -> dict[str, object]:
    with AuditStore.open(settings.database_url) as store:
        events = store.events_for_request(request_id)
    [request] = [e for e in events if e.kind == EventKind.REQUEST]
    return request.data


def _rotate(tmp_path: Path) -> tuple[Path, Path, str]:
    """Replace the cache key beside the database: the old one goes into the ring's file."""
    old = (tmp_path / CACHE_KEY_FILE).read_text(encoding="ascii").strip()
    ring = tmp_path / "previous-cache.keys"
    ring.write_text(f"# replaced 2026-12-02\n{old}\n", encoding="ascii")
    current = tmp_path / "cache-2026-12.key"
    current.write_text(NEW_KEY, encoding="ascii")
    return current, ring, CacheKey(bytes.fromhex(old)).key_id


def test_erase_by_subject_finds_the_requests_of_both_keys(
    make_gateway: MakeGateway, erasing: Erasing, settings: Settings, tmp_path: Path
) -> None:
    before = make_gateway().complete("compliance_review", "Clause 4?", subject=SUBJECT)
    current, ring, old_id = _rotate(tmp_path)
    rotated = settings.model_copy(
        update={"cache_key_file": current, "previous_cache_keys_file": ring}
    )
    after = make_gateway(cache_key_file=current, previous_cache_keys_file=ring).complete(
        "compliance_review", "Clause 5?", subject=SUBJECT
    )
    old_data, new_data = _request(settings, before.request_id), _request(settings, after.request_id)
    new_id = CacheKey(bytes.fromhex(NEW_KEY)).key_id
    assert (old_data["subject_key"], new_data["subject_key"]) == (old_id, new_id)
    assert old_data["subject"] != new_data["subject"]

    # Without the ring: only the new era is found, and the old one is reported unsearched.
    only_new = settings.model_copy(update={"cache_key_file": current})
    with Erasing.open(only_new) as facade:
        assert facade.subject_requests(SUBJECT) == [after.request_id]
    with Erasing.open(rotated) as facade:
        assert facade.subject_requests(SUBJECT) == [before.request_id, after.request_id]
        report = facade.erase_subject(SUBJECT, reason="DSAR-11", actor="j", approver="dpo")
    assert set(report.erased) == {before.request_id, after.request_id}
    assert report.unsearched == {}


def test_an_erasure_without_the_old_key_says_what_it_could_not_search(
    make_gateway: MakeGateway, erasing: Erasing, settings: Settings, tmp_path: Path
) -> None:
    make_gateway().complete("compliance_review", "Clause 4?", subject=SUBJECT)
    current, _, old_id = _rotate(tmp_path)
    after = make_gateway(cache_key_file=current).complete(
        "compliance_review", "Clause 5?", subject=SUBJECT
    )
    env = {"GATEWAY_DATABASE_URL": settings.database_url, "GATEWAY_CACHE_KEY_FILE": str(current)}
    args = ["audit", "erase", "--subject", SUBJECT, "--reason", "DSAR-12", "--approver", "dpo"]
    done = CliRunner().invoke(main, [*args, "--actor", "j"], env=env)
    assert done.exit_code == 0, done.output
    assert f"erased {after.request_id}" in done.output
    assert f"1 request(s) carry subject tags made under cache key {old_id}" in done.output


def test_a_subject_hold_placed_after_a_rotation_holds_the_older_requests(
    make_gateway: MakeGateway, erasing: Erasing, settings: Settings, tmp_path: Path
) -> None:
    before = make_gateway().complete("compliance_review", "Clause 4?", subject=SUBJECT)
    current, ring, _ = _rotate(tmp_path)
    env = {
        "GATEWAY_DATABASE_URL": settings.database_url,
        "GATEWAY_CACHE_KEY_FILE": str(current),
        "GATEWAY_PREVIOUS_CACHE_KEYS_FILE": str(ring),
    }
    held = CliRunner().invoke(
        main, ["audit", "hold", "--subject", SUBJECT, "--reason", "Case 4", "--actor", "l"], env=env
    )
    assert held.exit_code == 0, held.output
    with pytest.raises(ErasureRefused, match="legal hold"):
        erasing.erase([before.request_id], rule="other", reason="r", actor="j", approver="dpo")


def test_a_lost_cache_key_file_is_an_error_not_a_new_key(
    gw: Gateway, make_gateway: MakeGateway, tmp_path: Path
) -> None:
    gw.complete("compliance_review", "Clause 4?", subject=SUBJECT)
    gw.close()
    key_file = tmp_path / CACHE_KEY_FILE
    key_file.unlink()
    with pytest.raises(ConfigurationError, match=r"cache key file .* is missing") as caught:
        make_gateway().complete("compliance_review", "Clause 5?")
    assert "Restore the deployment's cache key" in str(caught.value.hint)
    assert not key_file.exists()


def test_a_log_of_plain_hashes_still_gets_its_first_cache_key(
    make_gateway: MakeGateway, tmp_path: Path
) -> None:
    key_file = tmp_path / CACHE_KEY_FILE
    make_gateway().complete("compliance_review", "Clause 4?")
    assert key_file.exists()


def test_an_unusable_line_in_the_ring_is_one_clear_error(
    erasing: Erasing, settings: Settings, tmp_path: Path
) -> None:
    ring = tmp_path / "previous-cache.keys"
    ring.write_text("not-hex\n", encoding="ascii")
    broken = settings.model_copy(update={"previous_cache_keys_file": ring})
    with Erasing.open(broken) as facade, pytest.raises(ConfigurationError, match="line 1"):
        facade.subject_requests(SUBJECT)
