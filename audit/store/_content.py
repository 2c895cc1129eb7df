"""Reading stored content: directly, or (a PostgreSQL reviewer) against a committed ACCESS record.

    reader = ContentReader(backend)
    reader.direct                           # may this session SELECT payloads.content?
    with reader.under(access_seq):          # the ACCESS event that records this read
        reader.payload(ref)                 # through audit_read_content() when not direct
    reader.hashes(refs)                     # digest -> SHA-256 of the stored bytes, any role

A PostgreSQL role that reads but does not write content (``gateway db grant --read-only``,
``--eraser``) selects ``payloads.digest`` and ``size`` only (migration 0015). Its content
reads go through ``audit_read_content(access_seq, digest)``, which returns the bytes only
when the ``access`` event at ``access_seq`` was inserted and committed by this same session
user, recently, and names the digest. The audited commands record that event first, then read
under it (gateway.evidence). Checks that only need to know whether content is intact use
:meth:`ContentReader.hashes`, which any role may call and which returns no content.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from audit.canonical import digest
from audit.errors import ContentMismatch, ContentNotPermitted, NotFound
from audit.store.backend import Backend, db_reason
from audit.store.chain import as_bytes
from audit.store.schema import PAYLOADS

# The ACCESS event (its seq) under which this context reads content; None: none recorded.
_ACCESS_SEQ: ContextVar[int | None] = ContextVar("audit_access_seq", default=None)
PAGE = 1000
DIRECT_SQL = "SELECT has_column_privilege('payloads', 'content', 'SELECT')"
READ_SQL = "SELECT audit_read_content(:seq, :ref)"
HASHES_SQL = "SELECT digest, content_hash FROM audit_content_hashes(:refs)"


class ContentReader:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._direct: bool | None = None if backend.dialect == "postgresql" else True

    @property
    def direct(self) -> bool:
        """Whether this session may select stored content itself (SQLite: always)."""
        if self._direct is None:
            with self._backend.reader.connect() as conn:
                self._direct = bool(conn.execute(text(DIRECT_SQL)).scalar_one())
        return self._direct

    @staticmethod
    @contextmanager
    def under(access_seq: int) -> Iterator[None]:
        """Read content in this block as recorded by the ACCESS event at ``access_seq``."""
        token = _ACCESS_SEQ.set(access_seq)
        try:
            yield
        finally:
            _ACCESS_SEQ.reset(token)

    def payloads(self, digests: Iterable[str]) -> dict[str, bytes]:
        """Each stored digest of ``digests`` whose bytes still hash to it (others left out)."""
        wanted = sorted(set(digests))
        found: dict[str, bytes] = {}
        if not self.direct:
            for ref in wanted:
                data = self._through_access(ref)
                if data is not None and digest(data) == ref:
                    found[ref] = data
            return found
        with self._backend.reader.connect() as conn:
            for start in range(0, len(wanted), PAGE):
                chunk = wanted[start : start + PAGE]
                query = select(PAYLOADS.c.digest, PAYLOADS.c.content).where(
                    PAYLOADS.c.digest.in_(chunk)
                )
                for ref, content in conn.execute(query):
                    data = as_bytes(content)
                    if digest(data) == ref:
                        found[ref] = data
        return found

    def payload(self, content_digest: str) -> bytes:
        """The stored bytes of ``content_digest``: :class:`NotFound` when none are stored,
        :class:`ContentMismatch` when they no longer hash to it."""
        if self.direct:
            with self._backend.reader.connect() as conn:
                content = conn.execute(
                    select(PAYLOADS.c.content).where(PAYLOADS.c.digest == content_digest)
                ).scalar_one_or_none()
            data = None if content is None else as_bytes(content)
        else:
            data = self._through_access(content_digest)
        if data is None:
            raise NotFound(f"there is no stored payload {content_digest}.")
        actual = digest(data)
        if actual != content_digest:
            raise ContentMismatch(content_digest, actual)
        return data

    def check(self, content_digest: str) -> None:
        """:meth:`payload`'s checks without returning (or, when not direct, reading) it."""
        if self.direct:
            self.payload(content_digest)
            return
        actual = self.hashes([content_digest]).get(content_digest)
        if actual is None:
            raise NotFound(f"there is no stored payload {content_digest}.")
        if actual != content_digest:
            raise ContentMismatch(content_digest, actual)

    def hashes(self, digests: Iterable[str]) -> dict[str, str]:
        """digest -> the SHA-256 digest of the bytes stored under it, for each one stored."""
        wanted = sorted(set(digests))
        found: dict[str, str] = {}
        if self._backend.dialect != "postgresql":
            found.update((ref, digest(data)) for ref, data in self.payloads(wanted).items())
            return found
        with self._backend.reader.connect() as conn:
            for start in range(0, len(wanted), PAGE):
                rows = conn.execute(text(HASHES_SQL), {"refs": wanted[start : start + PAGE]})
                found.update((str(ref), str(actual)) for ref, actual in rows)
        return found

    def _through_access(self, ref: str) -> bytes | None:
        seq = _ACCESS_SEQ.get()
        if seq is None:
            raise ContentNotPermitted(
                "this database role reads stored content only through an audited command.",
                hint="Use `gateway audit show REQUEST_ID --content --reviewer NAME` or "
                "`gateway audit export --with-content`: each records an ACCESS event first.",
            )
        try:
            with self._backend.reader.connect() as conn:
                content = conn.execute(text(READ_SQL), {"seq": seq, "ref": ref}).scalar_one()
        except DBAPIError as exc:
            raise ContentNotPermitted(
                f"the database refused to return content {ref} ({db_reason(exc)}).",
                hint="Content is returned against a committed ACCESS record of yours that "
                "names it (migration 0015).",
            ) from None
        return None if content is None else as_bytes(content)
