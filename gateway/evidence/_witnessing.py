"""A witness cosigns tree checkpoints (audit.proofs.witness), as the gateway's callers see it.

    outcome = witness(settings, Path("head.json"), seed_hex, "witness.bank.example/w1",
                      Path("w1-state.json"), [log_public_key_hex])
    if outcome.refused: ...          # the checkpoint file and the state are left as they were

The witness trusts only the log keys it is given and its own state file. The consistency
proof from its last cosigned size is the one the file carries (``tree-head --proof-from``)
when it starts at that size, else it comes from the log's database (GATEWAY_DATABASE_URL)
through the stored Merkle tree; either way it is checked against the two roots, so a proof
that lies makes the witness refuse, never cosign. The file may be a tree-head file or a receipt
(whose checkpoint is cosigned). The state is written before the checkpoint, atomically, and
runs on one state file are serialised (an flock on a lock file beside it).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from audit.proofs.cosignature import cosigner_vkey, public_of
from audit.proofs.receipts import (
    RECEIPT_FORMAT,
    dumps,
    load_checkpoint,
    load_receipt,
    stored_consistency_proof,
)
from audit.proofs.witness import Witnessed, WitnessState, cosign
from gateway._inputs import key_seed, read_text_file
from gateway._store_adapter import StoreAdapter, audit_call
from gateway.errors import GatewayError, InputError
from gateway.settings import Settings

__all__ = ["WitnessOutcome", "witness"]


class WitnessOutcome(NamedTuple):
    refused: str | None
    name: str
    public_key: str  # hex: what readers pass as --witness-key NAME=KEY
    vkey: str  # the same key as C2SP tools write it
    origin: str
    tree_size: int
    root: str
    previous: Witnessed | None  # this witness's last cosigned tree of the log, if any
    written: Path | None


def _seed(text: str) -> bytes:
    return key_seed(
        text,
        "the witness key",
        hint="Make one with `gateway keys new witness --out FILE`, "
        "keep it apart from GATEWAY_CHECKPOINT_KEY, and pass it as --key or "
        "GATEWAY_WITNESS_KEY.",
    )


def _write_atomically(path: Path, text: str) -> None:
    """On disk before the cosigned checkpoint is handed out: a state that a crash could roll
    back would let the witness cosign a same-size fork afterwards."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror}.") from None


@contextmanager
def _exclusive(state_file: Path) -> Iterator[None]:
    """One run at a time per state file: two runs deciding from the same state could each
    cosign one side of a fork."""
    lock = state_file.with_name(f".{state_file.name}.lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        reason = exc.strerror
        raise InputError(f"cannot lock the witness state {str(state_file)!r}: {reason}.") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def witness(
    settings: Settings,
    checkpoint_file: Path,
    key: str,
    name: str,
    state_file: Path,
    log_keys: Sequence[str],
    output: Path | None = None,
) -> WitnessOutcome:
    """Cosign the checkpoint in ``checkpoint_file`` (written back to ``output``, by default
    in place) if it extends what this witness last cosigned; else the reason, and nothing
    is written. Runs on one state file wait for each other."""
    seed = _seed(key)
    # Through a symlink the lock and the replace would act on the link, not the state.
    state_file = state_file.resolve()
    with _exclusive(state_file):
        return _witness(settings, checkpoint_file, seed, name, state_file, log_keys, output)


def _witness(
    settings: Settings,
    checkpoint_file: Path,
    seed: bytes,
    name: str,
    state_file: Path,
    log_keys: Sequence[str],
    output: Path | None,
) -> WitnessOutcome:
    if not log_keys:
        raise InputError(
            "a witness cosigns only checkpoints signed by a log key it trusts.",
            hint="Pass --log-key KEY: the public key of the log's GATEWAY_CHECKPOINT_KEY.",
        )
    text = read_text_file(checkpoint_file, "checkpoint")
    checkpoint = audit_call(load_checkpoint, text)
    state = (
        audit_call(WitnessState.loads, read_text_file(state_file, "witness state"))
        if state_file.exists()
        else audit_call(WitnessState.new, name, seed)
    )
    log: StoreAdapter | None = None

    def proof_for(old_size: int, new_size: int) -> list[bytes]:
        nonlocal log
        carried = checkpoint.consistency
        if carried is not None and carried.from_size == old_size:
            return carried.hashes()  # checked against both roots, like any other
        if log is None:
            try:
                log = StoreAdapter.open(settings)
            except GatewayError as exc:
                raise InputError(
                    f"the checkpoint carries no consistency proof from size {old_size} "
                    f"(the last tree this witness cosigned), and the log's database is "
                    f"not reachable: {exc.message}",
                    hint="Ask the log's operator for `gateway audit tree-head --proof-from "
                    "FILE` with the head this witness last cosigned, or point "
                    "GATEWAY_DATABASE_URL at the log.",
                ) from None
        # Raw, not through the adapter: cosign reads a CheckpointError here as a fork refusal.
        return stored_consistency_proof(log.store, old_size, new_size)

    try:
        result = audit_call(
            cosign, checkpoint, seed, name, log_keys, state, proof_for, int(time.time())
        )
    finally:
        if log is not None:
            log.close()
    public = public_of(seed)
    written = None
    if result.refused is None:
        _write_atomically(state_file, result.state.dumps())
        if json.loads(text).get("format") == RECEIPT_FORMAT:  # read once already: bounded
            receipt = audit_call(load_receipt, text)
            new_text = dumps(receipt.model_copy(update={"checkpoint": result.checkpoint}))
        else:
            new_text = dumps(result.checkpoint)
        written = output or checkpoint_file
        _write_atomically(written, new_text)
    return WitnessOutcome(
        refused=result.refused,
        name=name,
        public_key=public.hex(),
        vkey=cosigner_vkey(name, public),
        origin=checkpoint.origin,
        tree_size=checkpoint.tree_size,
        root=checkpoint.root,
        previous=result.previous,
        written=written,
    )
