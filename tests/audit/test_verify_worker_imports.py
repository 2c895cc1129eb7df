"""Verify's worker processes run the gateway's own code, wherever verify is started from.

A worker is started as ``python -m audit.verify._range_worker`` (or
``audit.verify._signature_worker`` for the signature pool). ``-m`` puts the current
directory first on the module path, so verify run from a directory holding an ``audit``
package of someone else's making (a checkout under review, a shared folder) would run that
code in its workers, with the database URL, password included, on their stdin. The workers
are started with ``-P``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import audit
from audit import AuditStore, EventDraft, EventKind
from audit.store.signing import Signer

pytestmark = pytest.mark.slow  # verify's worker processes

PLANTED = textwrap.dedent(
    """
    from pathlib import Path
    Path(__file__).with_name("ran").write_text("planted code ran")
    raise SystemExit(3)
    """
)

VERIFY = textwrap.dedent(
    """
    import sys
    from audit import AuditStore
    from audit.verify import verify_log
    from audit.store.signing import Signer, Trust, TrustedKeys
    url, seed = sys.argv[1], sys.argv[2]
    trust = Trust(TrustedKeys.of([Signer.from_text(seed).public_key]))
    with AuditStore.open(url, "os") as store:
        walked = verify_log(store, jobs=2, trust=None)   # the range walk's workers
        pooled = verify_log(store, jobs=1, trust=trust)  # the signature pool's
    print(walked.ok, pooled.ok, pooled.signatures_checked)
    """
)


def test_workers_do_not_import_an_audit_package_from_the_current_directory(
    tmp_path: Path,
) -> None:
    seed = "33" * 32
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url, "os", signer=Signer.from_text(seed)) as store:
        store.append_many(
            [EventDraft(kind=EventKind.EXPORT, request_id=f"e{n}") for n in range(20_001)]
        )
    planted = tmp_path / "elsewhere" / "audit"
    (planted / "verify").mkdir(parents=True)
    (planted / "__init__.py").write_text("")
    (planted / "verify" / "__init__.py").write_text("")
    for worker in ("_range_worker.py", "_signature_worker.py"):
        (planted / "verify" / worker).write_text(PLANTED)
    # The parent itself is started with -P and this checkout on its path: only its workers
    # are under test.
    done = subprocess.run(
        [sys.executable, "-P", "-c", VERIFY, url, seed],
        cwd=planted.parent,
        env={**os.environ, "PYTHONPATH": str(Path(audit.__file__).parents[1])},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert not (planted / "ran").exists(), "a worker ran the planted audit package"
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]


CHILD_IMPORTS = textwrap.dedent(
    """
    import os, sys
    from audit import AuditStore
    from audit.verify import verify_log
    from audit.store.signing import Signer, Trust, TrustedKeys
    url, seed = sys.argv[1], sys.argv[2]
    trust = Trust(TrustedKeys.of([Signer.from_text(seed).public_key]))
    os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # read at start-up: the workers' imports only
    with AuditStore.open(url, "os") as store:
        print(verify_log(store, jobs=1, trust=trust).ok)
    """
)


def test_signature_workers_import_cryptography_and_nothing_of_the_store(tmp_path: Path) -> None:
    """The audit package's imports (SQLAlchemy, pydantic) cost a worker about a second of CPU,
    on a 30,000-event log as much as a third of its signature checks."""
    seed = "34" * 32
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url, "os", signer=Signer.from_text(seed)) as store:
        store.append_many(
            [EventDraft(kind=EventKind.EXPORT, request_id=f"e{n}") for n in range(20_001)]
        )
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD_IMPORTS, url, seed],
        env={**os.environ, "PYTHONPATH": str(Path(audit.__file__).parents[1])},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"]
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "cryptography" in imported  # the workers ran, and were profiled
    assert not imported & {"audit", "sqlalchemy", "pydantic"}, sorted(imported)
