"""The auditing facade's proofs: verify the log, and take or check its checkpoints.

    report = auditing.verify(checkpoint=Path("head.json"))   # Auditing is a Proving
    head = auditing.checkpoint()                              # recorded, then kept as a file

What ``Auditing`` (_auditing) does with a log's integrity, apart from reading it: the walk of
:func:`audit.verify.verify_log` under the keys this gateway trusts, signed checkpoints and
verified checkpoints. The store is reached through the same :class:`StoreAdapter`.

The walk, the tree and the checkpoint files load on the first proof (through the lazy faces
of ``audit.verify``, ``audit.proofs`` and ``audit.sequenced``): a facade opened to list
requests (`gateway audit list`) starts without them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import audit.proofs
import audit.sequenced
import audit.verify
from audit import Checkpoint, CheckpointError, VerifyReport
from audit.proofs import checkpoint_key
from audit.store.signing import Trust, TrustedKeys, signature_check
from gateway._store_adapter import StoreAdapter, audit_call
from gateway.errors import ConfigurationError, InputError
from gateway.keys import integrator_keys, trusted_record_keys
from gateway.settings import Settings

__all__ = ["Progress", "Proving"]

Progress = Callable[[int, int], None]


class Proving:
    """Verify and checkpoint, over the open store of the facade this is part of."""

    _log: StoreAdapter
    _settings: Settings

    def _writing(self) -> StoreAdapter:
        """The store, able to sign (the facade reopens it with the record key)."""
        raise NotImplementedError

    def verify(
        self,
        *,
        checkpoint: Path | None = None,
        trusted_keys: Sequence[str] = (),
        allow_unsigned_before: int | None = None,
        unsafe_accept_unpinned_checkpoint: bool = False,
        progress: Progress | None = None,
        since_verified: Path | None = None,
        measure_head: bool = False,
        jobs: int | None = None,
    ) -> VerifyReport:
        """Recompute every hash and link, check each request's life and every record
        signature; with ``checkpoint``, also prove the log still holds and extends it.
        ``jobs``: worker processes (None: one per core on a large log; 1: this process).

        Trusted keys (the report lists them): this gateway's own record key, the configured
        ``trusted_keys`` and ``trusted_keys`` given here (public keys, hex). An event signed
        by none of them, or unsigned, is a defect; ``allow_unsigned_before=SEQ`` accepts
        unsigned events below SEQ (a log that predates signing; the report counts them).

        The checkpoint's signer must be pinned: a trusted key, or the public key of
        ``GATEWAY_CHECKPOINT_KEY``. Else it is refused (:class:`InputError`), unless
        ``unsafe_accept_unpinned_checkpoint`` - then the report's ``checkpoint_pinned`` is
        False, and whoever shows it must say so.

        ``since_verified``: a verified checkpoint (:meth:`verified_checkpoint`) signed by
        ``GATEWAY_CHECKPOINT_KEY`` (not a record key), never accepted unpinned; the record
        signatures it attests are not checked again (audit.proofs.checkpoint.relied_on says what
        is).
        ``measure_head``: for a verified checkpoint.
        """
        from audit.proofs import checkpoint as checkpoints  # the files: on the first proof

        keys = trusted_record_keys(self._settings, self._log.store.signer, trusted_keys)
        head = None
        pinned = None
        pins = {k.public_key for k in keys}
        own = self._signing_key()
        if own is not None:
            pins.add(checkpoint_key.public_key(own))
        base = relied = None
        if since_verified is not None:
            # Only the checkpoint key attests a verify: a record key's holder (a rotated-out
            # key still trusted for its old events, a partner's) must not be able to vouch
            # for the signatures a later verify then skips.
            attesters = {checkpoint_key.public_key(own)} if own is not None else set()
            base = self._load_checkpoint(since_verified)
            self._log.run(audit.verify.check_checkpoint, base)
            relied = audit_call(checkpoints.relied_on, base, keys, attesters)
            self._refuse_retired(base, keys)
        if checkpoint is not None:
            head = self._load_checkpoint(checkpoint)
            self._log.run(audit.verify.check_checkpoint, head)  # another database's: say that first
            self._refuse_retired(head, keys)
            pinned = audit_call(
                checkpoints.pinned,
                head,
                pins,
                unsafe_accept_unpinned=unsafe_accept_unpinned_checkpoint,
            )
        trust = Trust(keys, allow_unsigned_before or 1, integrator_keys(self._settings))
        report = self._log.run(
            audit.verify.verify_log,
            progress,
            checkpoint=head,
            trust=trust,
            relied=relied,
            measure_head=measure_head,
            jobs=jobs,
            stalled_after_s=self._settings.integration_stalled_after_s,
        )
        if base is not None:
            report = report.model_copy(update={"signatures_attested": checkpoints.signed_by(base)})
        if head is None:
            return report
        return report.model_copy(
            update={"checkpoint_signer": head.public_key, "checkpoint_pinned": pinned}
        )

    def checkpoint(self, *, unsigned: bool = False) -> Checkpoint:
        """Record a CHECKPOINT event and return the head it made, signed with
        ``GATEWAY_CHECKPOINT_KEY``; unsigned only when no key is set and ``unsigned`` is asked
        for. Keep it with :func:`checkpoint_text`; ``verify(checkpoint=...)`` reads it back."""
        key = self._signing_key()
        if key is None and not unsigned:
            raise ConfigurationError(
                "no checkpoint signing key is configured.", hint=checkpoint_key.KEY_HINT
            )
        log = self._writing()
        # A format-2 log's head is the integrator's newest checkpoint, checked under its key.
        integrators = [k.public_key for k in integrator_keys(self._settings) or ()]
        if log.store.sequenced_from is not None:
            return log.run(audit.sequenced.integrated_checkpoint, key, integrators)
        return log.run(audit.proofs.take_checkpoint, key)

    def verified_checkpoint(self, report: VerifyReport, rests_on: Path | None = None) -> Checkpoint:
        """Sign, with ``GATEWAY_CHECKPOINT_KEY``, that ``report`` (a :meth:`verify` with
        ``measure_head``, relying on the verified checkpoint ``rests_on`` if given) found the
        log intact through its head. Nothing is written to the log: a verify only reads."""
        key = self._signing_key()
        if key is None:
            raise ConfigurationError(
                "no checkpoint signing key is configured: a verified checkpoint is signed.",
                hint=checkpoint_key.KEY_HINT,
            )
        base = self._load_checkpoint(rests_on) if rests_on is not None else None
        return self._log.run(audit.proofs.verified_checkpoint, report, key, base)

    def _refuse_retired(self, head: Checkpoint, keys: TrustedKeys) -> None:
        """Refuse a checkpoint its key signed after the log retired it (the rotations that
        count are those written under the record keys ``keys``)."""
        from gateway.evidence._checkpoint_rotation import CheckpointEras, refuse_retired_signer

        check = signature_check(keys, self._log.store.store_id)
        eras = self._log.run(CheckpointEras.read, check)
        refuse_retired_signer(head.public_key, head.seq, head.created_at, eras)

    def _signing_key(self) -> bytes | None:
        secret = self._settings.checkpoint_key
        if secret is None:
            return None
        try:
            return checkpoint_key.parse_key(secret.get_secret_value())
        except CheckpointError as exc:
            raise ConfigurationError(exc.message, hint=exc.hint) from exc

    def _load_checkpoint(self, path: Path) -> Checkpoint:
        """The checkpoint, unaltered since its signer signed it (who that is, is pinned)."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise InputError(
                f"cannot read the checkpoint file {str(path)!r}: {reason}.",
                hint="Pass the file written by `gateway audit checkpoint`.",
            ) from exc
        from audit.proofs import checkpoint as checkpoints  # the files: on the first proof

        return audit_call(checkpoints.load_any, text)
