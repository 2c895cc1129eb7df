"""A record key on a folder the process may not write (a read-only secret mount).

The cache key's default place is beside the record key file (gateway.keys.cache_key). When
that folder is read-only and no key is there, the gateway cannot make one: it records plain
request hashes, as before keyed hashes, and says so (``cache_key_unavailable``), rather than
failing every request. A key the operator put there is read and used. Nothing is left in
the folder either way.

Root writes through any mode bits, so as root the check runs in a forked child that has
become ``nobody`` first; without such a user the test is skipped.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from audit import AuditStore, EventKind
from audit.store.signing import create_key_file
from gateway import Gateway, Settings
from gateway.keys import CACHE_KEY_FILE, cache_key
from tests.gateway.conftest import SHIPPED

pytestmark = pytest.mark.slow  # as root, a forked child
Check = Callable[[], dict[str, Any]]


@pytest.fixture
def place() -> Iterator[Path]:
    """A folder outside pytest's private temporary root, so ``nobody`` can reach it."""
    root = Path(tempfile.mkdtemp(prefix="gateway-ro-keys-"))
    os.chmod(root, 0o755)  # noqa: S103  an unprivileged child walks it; no secret is readable
    (root / "keys").mkdir()
    (root / "db").mkdir()
    shutil.copytree(SHIPPED, root / "policies")
    yield root
    (root / "keys").chmod(0o755)
    shutil.rmtree(root)


def unprivileged(place: Path, check: Check, warm_up: Check) -> dict[str, Any]:
    """Run ``check`` as a user the folder's mode bits bind: this one, or as root a forked
    child that became ``nobody`` (the answer comes back as JSON through a pipe).
    ``warm_up`` runs first, as root: nobody may not read this interpreter's own files (under
    root's home), so everything the check imports must be imported before the fork."""
    if os.geteuid() != 0:
        return check()
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root, and there is no user 'nobody' to drop to")
    warm_up()
    for path in [place, *place.rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, check, report, leave without pytest's teardown
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            answer = check()
            code = 0
        except BaseException as exc:  # reported to the parent, which fails
            answer = {"crashed": f"{type(exc).__name__}: {exc}"}
        finally:
            with os.fdopen(write_end, "w") as out:
                out.write(json.dumps(answer))
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as answer_in:
        answer = json.loads(answer_in.read() or "{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    return answer


def settings_in(place: Path) -> Settings:
    return Settings(
        policy_dir=place / "policies",
        database_url=f"sqlite:///{place / 'db' / 'audit.db'}",
        record_key_file=place / "keys" / "record.key",
        durability="os",
        default_caller="tests",
    )


def record_one(place: Path) -> dict[str, Any]:
    """A request through a gateway whose record key sits in ``place/keys``: what it recorded
    and logged, and what the key folder holds afterwards."""
    settings = settings_in(place)
    with capture_logs() as logs:
        key = cache_key(settings, create=True)
        with Gateway(settings) as gw:
            request_id = gw.complete("offline_demo", "hello").request_id
    with AuditStore.open(settings.database_url) as store:
        [request] = [e for e in store.events_for_request(request_id) if e.kind is EventKind.REQUEST]
    return {
        "has_key": key is not None,
        "request_hash": request.request_hash,
        "unavailable": [
            {"path": entry.get("path"), "level": entry["log_level"]}
            for entry in logs
            if entry["event"] == "cache_key_unavailable"
        ],
        "keys": sorted(os.listdir(place / "keys")),
    }


def warm_up() -> dict[str, Any]:
    """The same request in a writable folder of its own (its imports, its lazy loads)."""
    scratch = Path(tempfile.mkdtemp(prefix="gateway-warm-"))
    try:
        for name in ("keys", "db"):
            (scratch / name).mkdir()
        shutil.copytree(SHIPPED, scratch / "policies")
        create_key_file(scratch / "keys" / "record.key")
        return record_one(scratch)
    finally:
        shutil.rmtree(scratch)


def test_no_cache_key_can_be_made_there_so_hashes_are_plain_and_it_says_so(place: Path) -> None:
    create_key_file(place / "keys" / "record.key")
    (place / "keys").chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    answer = unprivileged(place, lambda: record_one(place), warm_up)
    assert answer["has_key"] is False
    assert str(answer["request_hash"]).startswith("sha256:")
    where = str(place / "keys" / CACHE_KEY_FILE)
    assert answer["unavailable"] and {e["path"] for e in answer["unavailable"]} == {where}
    assert {e["level"] for e in answer["unavailable"]} == {"warning"}
    assert answer["keys"] == ["record.key"]  # no key, no temporary file left behind


def test_a_cache_key_the_operator_put_there_is_read_and_used(place: Path) -> None:
    create_key_file(place / "keys" / "record.key")
    (place / "keys" / CACHE_KEY_FILE).write_text("47" * 32 + "\n", encoding="ascii")
    (place / "keys" / CACHE_KEY_FILE).chmod(0o600)
    (place / "keys").chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    answer = unprivileged(place, lambda: record_one(place), warm_up)
    assert answer["has_key"] is True and answer["unavailable"] == []
    assert str(answer["request_hash"]).startswith("hmac-sha256:")
    assert answer["keys"] == [CACHE_KEY_FILE, "record.key"]
