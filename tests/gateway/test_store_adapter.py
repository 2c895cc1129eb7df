"""`gateway._store_adapter`: the one place an audit error becomes the gateway's.

The facades reach the audit store through a ``StoreAdapter`` (or, for audit code over a file,
``audit_call``); no other product module translates by hand.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import audit
from audit import AuditStore, EventDraft, EventKind, StoredEvent
from audit.proofs import checkpoint as checkpoints
from gateway import AuditUnavailable, InputError, Settings
from gateway._store_adapter import StoreAdapter, audit_call, require_database

ROOT = Path(__file__).resolve().parents[2]

# The request path's own fail-closed messages name the request that stopped and that nothing
# was sent; the table cannot say that, so these two keep their own ``except AuditStoreError``.
OWN_MESSAGES = {"gateway/request/_recording.py", "gateway/request/_served.py"}


@pytest.fixture
def store(sqlite_url: str) -> Iterator[AuditStore]:
    with AuditStore.open(sqlite_url) as opened:
        opened.append(EventDraft(kind=EventKind.REQUEST, request_id="r-1", task="pricing"))
        yield opened


def test_a_store_method_run_through_the_adapter_raises_the_gateways_error(
    store: AuditStore,
) -> None:
    with pytest.raises(InputError) as caught:
        StoreAdapter(store).run(AuditStore.event, 99)
    assert isinstance(caught.value.__cause__, audit.NotFound)


def test_an_error_raised_while_an_operation_is_read_leaves_as_the_gateways(
    store: AuditStore,
) -> None:
    def then_a_missing_seq(opened: AuditStore) -> Iterator[StoredEvent]:
        yield from opened.iter_events()
        yield opened.event(99)

    read: list[StoredEvent] = []
    with pytest.raises(InputError) as caught:
        for event in StoreAdapter(store).each(then_a_missing_seq):
            read.append(event)
    assert [e.request_id for e in read] == ["r-1"]  # what was read before still arrived
    assert isinstance(caught.value.__cause__, audit.NotFound)


def test_opening_a_database_that_is_not_there_is_audit_unavailable_and_creates_nothing(
    tmp_path: Path,
) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'none.db'}")
    with pytest.raises(AuditUnavailable):
        require_database(settings)
    with pytest.raises(AuditUnavailable) as caught:
        StoreAdapter.open(settings)
    assert isinstance(caught.value.__cause__, audit.DatabaseUnavailable)
    assert not (tmp_path / "none.db").exists()


def test_audit_code_over_a_file_leaves_with_the_gateways_error() -> None:
    with pytest.raises(InputError) as caught:
        audit_call(checkpoints.loads, "not a checkpoint")
    assert isinstance(caught.value.__cause__, audit.CheckpointError)


def _catches_audit_errors(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(isinstance(n, ast.Name) and n.id == "AuditStoreError" for n in names)


def _translations(tree: ast.Module) -> Iterator[int]:
    """Lines that turn an audit error into another error by hand: a call of the table, or
    a handler of ``AuditStoreError`` that raises (one that notes a finding is no translation)."""
    for node in ast.walk(tree):
        by_table = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if by_table and node.func.id in {"translated", "audit_failure"}:
            yield node.lineno
        handler = isinstance(node, ast.ExceptHandler) and _catches_audit_errors(node)
        if handler and any(isinstance(n, ast.Raise) for n in ast.walk(node)):
            yield node.lineno


def test_no_product_module_translates_audit_errors_by_hand() -> None:
    found = []
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name == "gateway/_store_adapter.py" or name in OWN_MESSAGES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{name}:{line}" for line in _translations(tree)]
    assert found == []
