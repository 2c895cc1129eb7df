"""The log's format, as the store holds it: its writer, following the log when it begins format 2.

    writer = LogFormat(backend, store_id, signer, era=None)   # format 1: the chain lock
    writer.commit([prepare(draft)])    # refused as format 1 after a switch: format 2, once
    writer.era                         # the first format-2 seq once it followed (else None)

A store opened while the log was in format 1 writes with the chain lock
(:class:`audit.store._append.Appender`). Once another store begins format 2
(``audit_begin_sequenced()``), the chain guard refuses every format-1 row: its row always
has a ``prev_hash``, and the guard's format-2 checks raise ``check_violation`` ("audit
chain: seq N was not reserved (events_seq is at M)" while no format-2 writer has reserved
that far, else "audit chain: a format-2 event (seq N) has no prev_hash"). Without this a
gateway process that opened the log before the switch would fail every append closed until
restarted.

So a batch refused that way re-reads the era; if the log is in format 2 now, this writer
switches to :class:`audit.store._sequenced_append.SequencedAppender` for good and commits the same
batch once more. That is safe because the refusal comes from a BEFORE INSERT trigger: the
format-1 transaction rolled back whole, nothing of it was committed, and the batch keeps its
event ids, so each event is recorded once. A retry that fails too raises, as any append does
(fail closed). Many threads refused at once switch once: the switch runs under a lock and
the first thread's writer is the one every later thread finds.
"""

from __future__ import annotations

import threading
from contextlib import suppress

from sqlalchemy.exc import SQLAlchemyError

from audit.errors import AppendFailed
from audit.store._append import Appender
from audit.store._prepare import Known, Prepared
from audit.store._sequenced_append import SequencedAppender
from audit.store.backend import Backend
from audit.store.models import Appended
from audit.store.sequenced import sequenced_from
from audit.store.signing import Signer

CHECK_VIOLATION = "23514"  # the SQLSTATE of the chain guard's refusals
GUARD_PREFIX = "audit chain: "  # how each of the chain guard's messages begins


def refused_by_guard(exc: BaseException) -> bool:
    """Whether a failed append is the chain guard refusing a row (not a lost connection,
    a lock timeout or a conflict): the only failure a switch to format 2 explains."""
    orig = getattr(exc.__cause__, "orig", None)
    if getattr(orig, "sqlstate", None) != CHECK_VIOLATION:
        return False
    primary = getattr(getattr(orig, "diag", None), "message_primary", None)
    return isinstance(primary, str) and primary.startswith(GUARD_PREFIX)


class LogFormat:
    """The one strategy object for the log's format that a store holds: its one writer.
    ``commit`` has the appenders' shape, so group commit drives it; ``era`` is the first
    format-2 seq this writer knows of (None: format 1)."""

    def __init__(
        self, backend: Backend, store_id: str, signer: Signer | None, *, era: int | None
    ) -> None:
        self._backend = backend
        self._store_id = store_id
        self.era = era
        self._appender: Appender | SequencedAppender = (
            Appender(backend, signer)
            if era is None
            else SequencedAppender(backend, store_id, signer)
        )
        self._switching = threading.Lock()

    @property
    def signer(self) -> Signer | None:
        return self._appender.signer

    @property
    def known(self) -> Known:
        return self._appender.known

    def commit(self, batch: list[Prepared]) -> list[Appended]:
        appender = self._appender
        try:
            return appender.commit(batch)
        except AppendFailed as exc:
            if not isinstance(appender, Appender) or not refused_by_guard(exc):
                raise
            with suppress(SQLAlchemyError):  # the era unreadable: the refusal stands
                self.follow()
            if self.era is None:
                raise
        # Once, with the format-2 writer; whatever it raises is the append's error.
        return self._appender.commit(batch)

    def follow(self) -> int | None:
        """Re-read the era; if the log has begun format 2 since this writer was made, switch
        to the format-2 writer (once, however many threads ask). The era, or None."""
        if self.era is not None:
            return self.era
        with self._switching:
            if self.era is None:  # another thread may have switched while this one waited
                with self._backend.reader.connect() as conn:
                    era = sequenced_from(conn)
                if era is not None:
                    old = self._appender
                    self._appender = SequencedAppender(self._backend, self._store_id, old.signer)
                    self.era = era  # after the writer: whoever reads the era finds it ready
                    old.close()
        return self.era

    def after_fork(self) -> None:
        self._switching = threading.Lock()  # a thread of the parent's may have held it
        self._appender.after_fork()

    def close(self) -> None:
        self._appender.close()
