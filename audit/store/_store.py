"""AuditStore: open, append, read and find the audit log's events.

    with AuditStore.open("sqlite:///gateway-audit.db") as store:
        appended = store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1", data={}))
        store.event(appended.seq).kind            # EventKind.REQUEST

Verifying (audit.verify) and checkpointing (audit.proofs) take a store as an argument.

One append is one transaction (payload rows, policy row, event), committed durably before
``append`` returns. Appends from many threads are grouped (see ``audit.store._group``); many
processes and instances share one chain through the backend's lock (``audit.store.backend``).
Reads stream in keyset pages, so nothing ever loads the whole log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from sqlalchemy import ColumnElement, case, func, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from audit.canonical import digest
from audit.errors import (
    AuditStoreError,
    ContentMismatch,
    DatabaseUnavailable,
    LogFormatUnsupported,
    NotFound,
    UnreadableContent,
)
from audit.sealing import opened
from audit.store._append import interrupted, item_specific
from audit.store._content import ContentReader
from audit.store._fork import on_fork_child
from audit.store._group import Done, GroupCommitter
from audit.store._log_format import LogFormat
from audit.store._opening import begin_format_2, missing_database, unavailable
from audit.store._prepare import Prepared, prepare
from audit.store._reads import READ_PAGE, EventKey, filters_of, stored_event
from audit.store._revisions import check_at_head, create_sqlite_schema, current_revision
from audit.store.backend import Backend
from audit.store.bounded import UnreadableJSON
from audit.store.bounded import loads as bounded_loads
from audit.store.chain import GENESIS, EventRow, as_bytes
from audit.store.models import Appended, EventDraft, EventKind, StoredEvent
from audit.store.schema import AUDIT_META, EVENTS, POLICIES
from audit.store.sequenced import LOG_FORMATS, sequenced_from, unlinked, unlinked_requests
from audit.store.signing import SEQUENCED_PREV, Signer


class AuditStore:
    def __init__(
        self,
        backend: Backend,
        store_id: str,
        signer: Signer | None = None,
        *,
        sequenced_from: int | None = None,
    ) -> None:
        self._backend = backend
        self.store_id = store_id
        # Once a log is in format 2 every writer appends in format 2 (audit.store.sequenced), a
        # store opened before the switch too, from its first refused append on.
        self._writer = LogFormat(backend, store_id, signer, era=sequenced_from)
        self._committer: GroupCommitter[Prepared, Appended] = GroupCommitter(
            self._writer.commit, retry_alone=item_specific, interrupted=interrupted
        )
        self._content = ContentReader(backend)
        on_fork_child(self, AuditStore._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        # Order matters: the writer's connection is set aside before its pool is replaced,
        # and the caches are emptied before the child's first connection is opened.
        self._writer.after_fork()
        self._backend.after_fork()
        self._committer.after_fork()

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        durability: str = "fsync",
        *,
        signer: Signer | None = None,
        create: bool = True,
        log_format: int = 1,
    ) -> AuditStore:
        """Open the audit database at ``url``.

        ``signer`` signs every event this store appends (audit.store.signing); without one events
        are written unsigned. ``create``: a SQLite file that does not exist is created and
        migrated (the default); with ``create=False`` it is :class:`DatabaseUnavailable`
        ("no audit database at PATH") and nothing is created, as read-only commands need.
        ``log_format=2`` (PostgreSQL only) begins format 2 if the log has not (docs/scaling.md;
        :class:`LogFormatUnsupported` for a role that may not); a log already in format 2 is
        appended to in format 2 whatever ``log_format`` says, and a store opened before the
        log began format 2 follows it at its first refused append (audit.store._log_format).
        """
        if log_format not in LOG_FORMATS:
            raise LogFormatUnsupported(f"audit log format {log_format!r} does not exist.")
        if not create and (missing := missing_database(url)) is not None:
            raise missing
        backend = Backend.connect(url, durability)
        if log_format == 2 and backend.dialect != "postgresql":
            backend.dispose()
            raise LogFormatUnsupported(
                "audit log format 2 needs PostgreSQL; this audit database is SQLite.",
                hint="Unset GATEWAY_AUDIT_FORMAT (SQLite is one writer's chain) or point "
                "GATEWAY_DATABASE_URL at PostgreSQL.",
            )
        try:
            if backend.dialect == "sqlite" and create:
                cls._create_sqlite_on_first_use(backend)
            with backend.reader.connect() as conn:
                check_at_head(conn)
                store_id = conn.execute(
                    select(AUDIT_META.c.value).where(AUDIT_META.c.key == "store_id")
                ).scalar_one()
                era = sequenced_from(conn)
            if era is None and log_format == 2:
                era = begin_format_2(backend)
        except SQLAlchemyError as exc:
            backend.dispose()
            raise unavailable(exc) from exc
        except BaseException:
            backend.dispose()
            raise
        return cls(backend, store_id, signer, sequenced_from=era)

    @staticmethod
    def _create_sqlite_on_first_use(backend: Backend) -> None:
        # One BEGIN IMMEDIATE from the check to head, so two processes opening a new file do
        # not both migrate it: the second waits for the lock, then finds the schema. (With a
        # transaction per migration it could start migrating between two of the first's.)
        with backend.writer.begin() as conn:
            if current_revision(conn) is not None:
                return
            if set(inspect(conn).get_table_names()) - {"alembic_version"}:
                raise DatabaseUnavailable(
                    "the SQLite file holds other tables and is not an audit database.",
                    hint="Point GATEWAY_DATABASE_URL at a new file or an audit database.",
                )
            create_sqlite_schema(conn)

    def close(self) -> None:
        self._committer.close()  # appends queued with append_soon are committed first
        self._writer.close()
        self._backend.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def durability(self) -> str:
        return self._backend.durability

    @property
    def backend(self) -> Backend:
        """The store's engines, for the readers that query the tables themselves (verify's
        walk, the Merkle tree, export); appends go through :meth:`append` only."""
        return self._backend

    @property
    def signer(self) -> Signer | None:
        """The record key this store signs its appends with (None: it writes them unsigned)."""
        return self._writer.signer

    @property
    def sequenced_from(self) -> int | None:
        """The log's first format-2 seq as this store knows it (None: format 1)."""
        return self._writer.era

    def follow_era(self) -> int | None:
        """Re-read the log's format: a store opened in format 1 whose log has begun format 2
        since switches to the format-2 writer. The first format-2 seq, or None."""
        try:
            return self._writer.follow()
        except SQLAlchemyError as exc:
            raise unavailable(exc) from exc

    @property
    def group_commits(self) -> int:
        """How many transactions appends have used so far (appends / this = group size)."""
        return self._committer.batches

    # -- appending ----------------------------------------------------------------------------

    def append(self, draft: EventDraft) -> Appended:
        return self._committer.submit(prepare(draft, self._writer.known))

    def append_soon(self, draft: EventDraft, done: Done[Appended]) -> None:
        """:meth:`append` for a caller that must not block (an event loop): ``draft`` is
        prepared here (an invalid one raises here), then joins the next group commit;
        ``done(appended, None)`` is called once it is durable, or ``done(None, error)``, from
        the store's committing thread (audit.store._group)."""
        self._committer.submit_soon(prepare(draft, self._writer.known), done)

    def append_many(self, drafts: list[EventDraft]) -> list[Appended]:
        """Append several events atomically in one transaction (imports, benchmarks)."""
        known = self._writer.known
        prepared = [prepare(d, known) for d in drafts]
        return self._writer.commit(prepared) if prepared else []

    # -- reading ------------------------------------------------------------------------------

    def event(self, seq: int) -> StoredEvent:
        with self._backend.reader.connect() as conn:
            rows = EventRow.from_result(conn.execute(select(EVENTS).where(EVENTS.c.seq == seq)))
        if not rows:
            raise NotFound(f"there is no audit event with seq {seq}.")
        return stored_event(rows[0])

    def link_of(self, event: StoredEvent) -> str | None:
        """What ``event`` must link to, as the log's format has it: genesis at seq 1, else
        the hash of the event before it (None when that cannot be read); a format-2 event
        links nowhere itself (the integrator links it, and verify checks those links)."""
        era = self.sequenced_from
        if era is None and event.prev_hash == SEQUENCED_PREV:
            era = self.follow_era()  # the log may have begun format 2 since the store opened
        if era is not None and event.seq >= era and event.prev_hash == SEQUENCED_PREV:
            return SEQUENCED_PREV
        if event.seq == 1:
            return GENESIS
        try:
            return self.event(event.seq - 1).hash
        except AuditStoreError:
            return None

    def events_for_request(self, request_id: str) -> list[StoredEvent]:
        return list(self._iter_where([EVENTS.c.request_id == request_id]))

    def iter_events(
        self,
        *,
        task: str | None = None,
        caller: str | None = None,
        kind: EventKind | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after_seq: int = 0,
        before_seq: int | None = None,
        request_ids: Sequence[str] | None = None,
        exclude_caller: str | None = None,
    ) -> Iterator[StoredEvent]:
        """Events in seq order matching every given filter (``until`` is exclusive);
        ``request_ids`` keeps the events of those requests only; ``exclude_caller`` leaves
        out the events recorded under that caller."""
        where = filters_of(task, caller, kind, since, until, before_seq, exclude_caller)
        if request_ids is not None:
            where.append(EVENTS.c.request_id.in_(sorted(set(request_ids))))
        return self._iter_where(where, after_seq=after_seq)

    def newest_requests(
        self,
        limit: int,
        *,
        task: str | None = None,
        caller: str | None = None,
        kind: EventKind | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        having_kind: EventKind | str | None = None,
        exclude_caller: str | None = None,
    ) -> list[str]:
        """The ids of the ``limit`` requests whose first event matching the filters (as
        :meth:`iter_events`) comes last, oldest first; with ``having_kind``, only requests
        with a matching event of that kind. The database groups and sorts: memory holds
        ``limit`` ids, whatever the size of the log."""
        where = filters_of(task, caller, kind, since, until, None, exclude_caller)
        first = func.min(EVENTS.c.seq).label("first_seq")
        query = (
            select(EVENTS.c.request_id, first)
            .where(EVENTS.c.seq >= 1, *where)  # chain rows only
            .group_by(EVENTS.c.request_id)
            .order_by(first.desc())
            .limit(limit)
        )
        if having_kind is not None:
            wanted = EventKind(having_kind).value
            query = query.having(func.sum(case((EVENTS.c.kind == wanted, 1), else_=0)) > 0)
        with self._backend.reader.connect() as conn:
            rows = conn.execute(query).all()
        return [row.request_id for row in reversed(rows)]

    def count_requests(
        self,
        *,
        task: str | None = None,
        caller: str | None = None,
        kind: EventKind | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        exclude_caller: str | None = None,
    ) -> int:
        """How many requests have an event matching the filters (as :meth:`iter_events`):
        counted by the database, so memory does not grow with the log."""
        where = filters_of(task, caller, kind, since, until, None, exclude_caller)
        query = select(func.count(func.distinct(EVENTS.c.request_id))).where(
            EVENTS.c.seq >= 1, *where
        )
        with self._backend.reader.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def event_keys(
        self,
        *,
        task: str | None = None,
        caller: str | None = None,
        kind: EventKind | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        exclude_caller: str | None = None,
        request_ids: Sequence[str] | None = None,
        after_seq: int = 0,
        before_seq: int | None = None,
        limit: int = READ_PAGE,
    ) -> list[EventKey]:
        """The seq, request id and policy fingerprint of up to ``limit`` events matching the
        filters (as :meth:`iter_events`) after ``after_seq``, in seq order: columns only, no
        body is read, so a caller can page through a selection cheaply before loading it."""
        where = filters_of(task, caller, kind, since, until, before_seq, exclude_caller)
        if request_ids is not None:
            where.append(EVENTS.c.request_id.in_(sorted(set(request_ids))))
        query = (
            select(EVENTS.c.seq, EVENTS.c.request_id, EVENTS.c.policy_fingerprint)
            .where(EVENTS.c.seq > after_seq, EVENTS.c.seq >= 1, *where)
            .order_by(EVENTS.c.seq)
            .limit(limit)
        )
        with self._backend.reader.connect() as conn:
            return [EventKey(*row) for row in conn.execute(query)]

    def pending_requests(self, request_ids: Iterable[str]) -> set[str]:
        """Which of ``request_ids`` have an event not linked yet (none in a format-1 log):
        one query for them all (audit list asks once a page, not once a row)."""
        if self.sequenced_from is None:
            return set()
        with self._backend.reader.connect() as conn:
            return unlinked_requests(conn, self.sequenced_from, list(request_ids))

    def pending_integration(self, seqs: Iterable[int]) -> set[int]:
        """Which of ``seqs`` are format-2 events not linked yet (none in a format-1 log)."""
        if self.sequenced_from is None:
            return set()
        with self._backend.reader.connect() as conn:
            return unlinked(conn, self.sequenced_from, list(seqs))

    def payloads(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The content of each of ``digests`` that is stored and still hashes to its digest
        (a sealed row opened: audit.sealing), in as few queries as the digests allow; a missing
        or altered payload is left out (:meth:`payload` says which it is). A role that reads
        content only against an ACCESS record reads inside :meth:`reading_under`
        (audit.store._content)."""
        return {ref: opened(data) for ref, data in self._content.payloads(digests).items()}

    def check_payload(self, content_digest: str) -> None:
        """What :meth:`payload` raises for ``content_digest``, without returning the content
        (and, for a role that may not select it, without reading it)."""
        self._content.check(content_digest)

    def content_hashes(self, digests: Iterable[str]) -> dict[str, str]:
        """digest -> the digest its stored bytes hash to, for each one stored: no content."""
        return self._content.hashes(digests)

    @property
    def reads_content_directly(self) -> bool:
        """Whether this session may select stored content itself (False: a PostgreSQL
        reviewer, which reads it only against a committed ACCESS record, migration 0015)."""
        return self._content.direct

    reading_under = staticmethod(ContentReader.under)

    def _iter_where(
        self, where: list[ColumnElement[bool]], *, after_seq: int = 0
    ) -> Iterator[StoredEvent]:
        for row in self._rows(where, after_seq=after_seq):
            yield stored_event(row)

    def _rows(
        self, where: list[ColumnElement[bool]], *, after_seq: int = 0, page: int = READ_PAGE
    ) -> Iterator[EventRow]:
        # Keyset pages, each on a short-lived connection: memory stays flat and no read
        # transaction is held open across the whole log.
        last = after_seq
        while True:
            with self._backend.reader.connect() as conn:
                rows = EventRow.from_result(
                    conn.execute(
                        select(EVENTS)
                        .where(EVENTS.c.seq > last, EVENTS.c.seq >= 1, *where)  # chain rows only
                        .order_by(EVENTS.c.seq)
                        .limit(page)
                    )
                )
            yield from rows
            if len(rows) < page:
                return
            last = rows[-1].seq

    def find_response(self, request_hash: str) -> StoredEvent | None:
        """The newest RESPONSE for ``request_hash`` whose ``data["ok"]`` is true."""
        return next((e for e in self.responses(request_hash) if e.data.get("ok") is True), None)

    def responses(self, request_hash: str, *also: str) -> Iterator[StoredEvent]:
        """The chain's RESPONSE events for ``request_hash`` (or any of ``also``: the same
        request under an older hash scheme), newest first, read a page at a time: candidates
        only (whether one may be served is for the gateway to decide)."""
        last: int | None = None
        hashes = (request_hash, *also)
        matches = (
            EVENTS.c.request_hash == request_hash if not also else EVENTS.c.request_hash.in_(hashes)
        )
        while True:
            query = (
                select(EVENTS)
                .where(
                    matches,
                    EVENTS.c.kind == EventKind.RESPONSE.value,
                    EVENTS.c.seq >= 1,  # a row below 1 is outside the chain: never serve it
                )
                .order_by(EVENTS.c.seq.desc())
                .limit(50)
            )
            if last is not None:
                query = query.where(EVENTS.c.seq < last)
            with self._backend.reader.connect() as conn:
                rows = EventRow.from_result(conn.execute(query))
            yield from (stored_event(row) for row in rows)
            if len(rows) < 50:
                return
            last = rows[-1].seq

    def payload(self, content_digest: str) -> bytes:
        """The content stored under ``content_digest`` (a sealed row opened:
        audit.sealing); :class:`ContentMismatch` if the stored bytes no longer hash to it (so
        altered content is never returned)."""
        return opened(self.stored_payload(content_digest))

    def stored_payload(self, content_digest: str) -> bytes:
        """The row's bytes exactly as stored under ``content_digest`` (a sealed row keeps
        its mark and salt): what hashes to the digest, for an export that must carry it."""
        return self._content.payload(content_digest)

    def policy_content(self, fingerprint: str) -> dict[str, Any] | None:
        with self._backend.reader.connect() as conn:
            content = conn.execute(
                select(POLICIES.c.content).where(POLICIES.c.fingerprint == fingerprint)
            ).scalar_one_or_none()
        if content is None:
            return None
        data = as_bytes(content)
        actual = digest(data)
        if actual != fingerprint:  # a policy used to re-plan must be the one recorded
            raise ContentMismatch(fingerprint, actual)
        try:
            parsed = bounded_loads(data)
        except UnreadableJSON as exc:
            raise UnreadableContent(
                f"the stored policy {fingerprint} cannot be read: {exc}.",
                hint="Run `gateway audit verify`; the row was not written by the gateway.",
            ) from None
        if not isinstance(parsed, dict):
            raise UnreadableContent(f"the stored policy {fingerprint} is not a JSON object.")
        return parsed

    def head(self) -> tuple[int, str]:
        with self._backend.reader.connect() as conn:
            row = conn.execute(
                select(EVENTS.c.seq, EVENTS.c.hash)
                .where(EVENTS.c.seq >= 1)
                .order_by(EVENTS.c.seq.desc())
                .limit(1)
            ).first()
        return (row.seq, row.hash) if row else (0, GENESIS)
