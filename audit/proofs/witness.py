"""Witness cosignatures on tree checkpoints (C2SP tlog-cosignature v1, Ed25519).

    result = cosign(checkpoint, seed, "witness.example/w1", [log_key_hex], state, proof_for)
    if result.refused: ...                       # a fork, a rollback: the reason
    Path(state_file).write_text(result.state.dumps())

A witness is a second, independent key that vouches, by cosigning a checkpoint, that the
tree it names consistently extends every tree of that log the witness cosigned before. Two
parties would have to collude to show one auditor a log and another a forked one. The
witness keeps only its last cosigned (size, root) per log origin (:class:`WitnessState`, a
small JSON file) and cosigns a new checkpoint only if the log's signature checks out under a
key it was told to trust and a consistency proof from its last size leads from its last
root to the new one. The proof may come from anywhere (the log's database, through the
stored Merkle tree): it is checked against the two roots, so its source is not trusted.

The cosignature is a C2SP tlog-cosignature line (audit.proofs.cosignature): any C2SP client
configured with the witness's name and key checks it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit.errors import CheckpointError
from audit.proofs.cosignature import WitnessError, add_cosignature, check_name, public_of
from audit.proofs.merkle import ProofError, TreeHead, verify_consistency
from audit.proofs.receipts import TreeCheckpoint, checked_checkpoint
from audit.store.bounded import UnreadableJSON
from audit.store.bounded import loads as bounded_loads

STATE_FORMAT: Final = "compliance-gateway witness state v1"
MAX_STATE = 1024 * 1024

# (old size, new size) -> the consistency proof between the log's trees of those sizes
ProofSource = Callable[[int, int], Sequence[bytes]]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- the witness's own state and decision ------------------------------------------------------


class Witnessed(_Frozen):
    tree_size: int = Field(ge=0)
    root: str  # base64
    cosigned_at: int
    # The log key (hex) that signed it: one key's trees are one log's, whatever origin a
    # later note names (None in state files written before this was kept).
    log_key: str | None = None


class WitnessState(_Frozen):
    format: Literal["compliance-gateway witness state v1"] = STATE_FORMAT
    name: str
    public_key: str  # hex: a state file is one witness key's
    logs: dict[str, Witnessed] = {}

    @classmethod
    def new(cls, name: str, seed: bytes) -> WitnessState:
        return cls(name=name, public_key=public_of(seed).hex())

    @classmethod
    def loads(cls, text: str) -> WitnessState:
        if len(text) > MAX_STATE:
            raise WitnessError(f"the witness state file is over {MAX_STATE // 1024} KB.")
        try:
            return cls.model_validate(bounded_loads(text.encode("utf-8")))
        except (UnreadableJSON, ValueError, ValidationError) as exc:
            raise WitnessError(
                f"the witness state file is not one ({str(exc).splitlines()[0][:120]}).",
                hint="Pass the --state file this witness wrote, or a new path to start one.",
            ) from None

    def dumps(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2) + "\n"


class CosignResult(NamedTuple):
    checkpoint: TreeCheckpoint  # with the cosignature when not refused
    state: WitnessState  # to write back when not refused
    refused: str | None
    previous: Witnessed | None  # what the witness had cosigned before, for this log


def cosign(
    checkpoint: TreeCheckpoint,
    seed: bytes,
    name: str,
    log_keys: Sequence[str],
    state: WitnessState,
    proof_for: ProofSource,
    now: int,
) -> CosignResult:
    """Cosign ``checkpoint`` if its log signature checks out under ``log_keys`` and it
    consistently extends what this witness last cosigned for its log; else the reason."""
    check_name(name)
    if state.name != name or state.public_key != public_of(seed).hex():
        raise WitnessError(
            f"the state file is witness {state.name!r}'s with key {state.public_key[:16]}..., "
            "not this witness key's.",
            hint="Each witness key keeps its own --state file.",
        )
    previous = state.logs.get(checkpoint.origin)

    def refuse(reason: str) -> CosignResult:
        return CosignResult(checkpoint, state, reason, previous)

    try:  # an unusable --log-key is the caller's error (ReceiptError), not a refusal
        head = checked_checkpoint(checkpoint, log_keys)
    except ProofError as exc:
        return refuse(f"the checkpoint's log signature does not check out: {exc}")
    signer = next(k for k in log_keys if _signs(checkpoint, k))
    if previous is None:
        # A log that signs a fork under a new origin must not start a fresh history here.
        known = [o for o, seen in state.logs.items() if seen.log_key == signer]
        if known:
            return refuse(
                f"this log key's trees were cosigned under origin {known[0]!r}; a note under "
                f"origin {checkpoint.origin!r} would start a second history of the same log "
                "(a fork)"
            )
    else:
        reason = _not_an_extension(previous, head, proof_for)
        if reason is not None:
            return refuse(reason)
    note = add_cosignature(checkpoint.note, name, seed, now)
    witnessed = Witnessed(
        tree_size=head.size, root=checkpoint.root, cosigned_at=now, log_key=signer
    )
    new_state = state.model_copy(update={"logs": {**state.logs, checkpoint.origin: witnessed}})
    return CosignResult(checkpoint.model_copy(update={"note": note}), new_state, None, previous)


def _signs(checkpoint: TreeCheckpoint, log_key: str) -> bool:
    try:
        checked_checkpoint(checkpoint, [log_key])
    except ProofError:
        return False
    return True


def _not_an_extension(previous: Witnessed, head: TreeHead, proof_for: ProofSource) -> str | None:
    old_root = base64.b64decode(previous.root)
    if head.size < previous.tree_size:
        return (
            f"the checkpoint is of {head.size} events, but this witness cosigned "
            f"{previous.tree_size} events of this log: the log shrank (rolled back or truncated)"
        )
    if head.size == previous.tree_size:
        if head.root != old_root:
            return (
                f"this witness cosigned another tree of {head.size} events of this log: "
                "the log forked"
            )
        return None
    try:
        proof = list(proof_for(previous.tree_size, head.size))
        verify_consistency(previous.tree_size, head.size, proof, old_root, head.root)
    except (ProofError, CheckpointError, ValueError) as exc:
        return (
            f"the tree of {head.size} events does not extend the tree of "
            f"{previous.tree_size} this witness last cosigned: a fork ({exc})"
        )
    return None
