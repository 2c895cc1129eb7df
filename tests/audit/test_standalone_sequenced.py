"""The standalone verifier agrees with `audit verify --export` on an export of a format-2 log
(links, voids, integrator checkpoints and their roots) on every case of that tamper matrix,
with and without the integrator's key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.audit.test_export_sequenced import _tamper, export, keys, log, verify, write
from tests.support.standalone import run_standalone

pytestmark = pytest.mark.postgres

TAMPERS = ["intact", "body", "link", "link-prev", "link-dropped", "checkpoint-altered",
           "checkpoint-by-a-record-key", "checkpoint-root", "prev-hash",
           "checkpoint-of-another-log", "checkpoint-moved", "checkpoint-on-pending",
           "integrator-signed-answer", "link-not-text", "not-ascii"]  # fmt: skip

__all__ = ["keys", "log"]  # the fixtures this module takes from the format-2 export tests


def _kinds(defects: list[object]) -> list[str]:
    return sorted({str(d["kind"] if isinstance(d, dict) else d[2]) for d in defects})  # type: ignore[index]


@pytest.mark.slow
@pytest.mark.parametrize("how", TAMPERS)
def test_the_standalone_verifier_agrees_on_a_format_2_export(
    log: str, keys: tuple[Path, Path], tmp_path: Path, how: str
) -> None:
    path = tmp_path / "all.jsonl"
    rows = export(log, path)
    if how != "intact":
        _tamper(rows, how)
    write(path, rows)
    record, integrator = keys
    for trusted in ((record, integrator), (record,)):
        code, report = verify(path, *trusted)
        args = ["--record-key", str(record)] + (["--integrator-key", str(integrator)]
                                                if len(trusted) == 2 else [])  # fmt: skip
        alone_code, alone = run_standalone(tmp_path, "export", path, *args)
        assert (alone_code, _kinds(alone["defects"])) == (code, _kinds(report["defects"])), (
            how, trusted, alone["defects"], report["defects"])  # fmt: skip
