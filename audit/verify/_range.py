"""A range walk's worker: checks whole pages of the chain in its own process.

    python -m audit.verify._range_worker      # started by audit.verify._parallel

Of verify's checks on a row, only the link to the previous row, the folds (Merkle tree,
signature-column digest), the checkpoints and each request's life need the rows before it;
the rest (hash, body, columns, time, content digests, record signature) do not. So a worker
reads a page of rows itself, by seq range, and makes every check on it that it can: the
same :class:`audit.verify._verifier.Verifier` code the one-process walk runs, with the link and gap
checks made inside the page (its first row is the parent's to link). It answers with a
:data:`PageResult`: the page's defects in the order they were found (each with the seq of
the row being checked, so the parent can put its own between them as the one-process walk
would have found them), the first ``prev_hash`` and last ``hash``, the four body fields each
life check needs, the tree leaves and signature-column lines the parent folds, and the hashes
at the seqs the parent's checkpoints name.

The parent sends the database URL (its password included: over our own pipe, never argv),
the trusted keys and what the folds need, then page ranges; ``marshal`` both ways (plain
tuples of text, bytes and ints, between our own processes).
"""

from __future__ import annotations

import gc
import marshal
from collections.abc import Mapping
from typing import IO, Any

from audit.store.backend import Backend
from audit.store.chain import EventRow
from audit.store.models import DefectKind, Relied
from audit.store.signing import Trust, TrustedKeys
from audit.verify._read import ChainReader
from audit.verify._verdicts import Verdict
from audit.verify._verifier import Verifier
from audit.verify._walk_digests import SignaturesDigest, leaf_of
from audit.verify.body import Parsed, newest_refs, parse_page, referenced
from audit.verify.lifecycle import FED_KINDS, NAMING_KINDS

# (row seq, defect kind, defect seq, detail): the row whose check found it, then the defect.
Found = tuple[int, str, int | None, str]
Life = tuple[int, str, Any, Any, Any]  # seq, kind, request id, request hash, data (or None)
# count, bytes, first seq, its prev_hash, last seq, its hash, defects, lives, unsigned
# allowed, {seq: hash} at the seqs asked for, tree leaves (None: not a sha256 hash), how many
# of those are at or before the tree cut, signature lines at or before the cut, after it.
PageResult = tuple[
    int, int, int, str, int, str, list[Found], list[Life], int, dict[int, str],
    list[bytes | None], int, bytes, bytes,
]  # fmt: skip
EVERY = -1  # an "upto" of every row (a fold through the head)


# What a worker is told once: ``url``, ``keys`` and ``allow_unsigned_before`` (keys None: no
# signatures checked), ``relied`` (seq, hash, key ids, digest, or None), ``tree_upto`` and
# ``sigs_upto`` (0: no fold; EVERY), ``tree_cut`` and ``sigs_cut`` (the seqs at which the
# parent reads the folds), ``marks`` (seqs whose hash it wants), ``page`` (rows at most).
Setup = dict[str, Any]


class _LifeStream:
    """Stands in for the :class:`audit.verify.lifecycle.Lifecycle` a :class:`Verifier` feeds: keeps
    what the parent's own Lifecycle will be fed, in seq order."""

    def __init__(self) -> None:
        self.fed: list[Life] = []

    def feed(self, seq: int, parsed: Mapping[str, Any]) -> None:
        kind = parsed.get("kind")
        if isinstance(kind, str) and kind in FED_KINDS:
            data = parsed.get("data") if kind in NAMING_KINDS else None
            self.fed.append((seq, kind, parsed.get("request_id"), parsed.get("request_hash"), data))

    def feed_fields(self, seq: int, kind: Any, rid: Any, rhash: Any, data: Any) -> None:
        """:meth:`feed` of a body read as its fields (audit.verify._ordinary_body)."""
        self.fed.append((seq, kind, rid, rhash, data))


class PageChecker(Verifier):
    """A :class:`Verifier` for one page at a time whose defects are kept with the seq of the
    row being checked; no folds, no checkpoints, lives only recorded (the parent's)."""

    def __init__(self, trust: Trust | None, relied: Relied | None, reader: ChainReader) -> None:
        super().__init__(None, trust, same_time=reader.same_time, relied=relied)
        self.tree = None
        self.sigs = None  # so no relied-on check either: the parent makes it
        self.found: list[Found] = []
        self.stream = _LifeStream()
        self.life = self.stream  # type: ignore[assignment]  # same feed(); settled by the parent
        self._row = 0

    def start(self, first: EventRow) -> None:
        """A new page: its first row's gap and link are the parent's to check."""
        self.expected, self.prev_hash = first.seq, first.prev_hash
        self.count = self.bytes = self.unsigned_allowed = 0
        self.found = []
        self.stream.fed = []

    def _defect(self, seq: int | None, kind: DefectKind, detail: str) -> None:
        self.found.append((self._row, kind.value, seq, detail))

    def feed(
        self,
        row: EventRow,
        parsed: Parsed,
        contents: Mapping[str, str | None],
        signature: Verdict | bool | None = False,
    ) -> None:
        self._row = row.seq
        super().feed(row, parsed, contents, signature)


def _upto(value: int) -> float:
    return float("inf") if value == EVERY else value


class Worker:
    def __init__(self, setup: Setup) -> None:
        self._backend = Backend.connect(setup["url"], "os")
        signatures = setup["keys"] is not None or setup["sigs_upto"] != 0
        self._reader = ChainReader(self._backend, upto=0, page=setup["page"], signatures=signatures)
        trust = None
        if setup["keys"] is not None:
            trust = Trust(TrustedKeys.of(setup["keys"]), setup["allow_unsigned_before"])
        relied = None
        if setup["relied"] is not None:
            seq, event_hash, keys, signatures_digest = setup["relied"]
            relied = Relied(seq, event_hash, frozenset(keys), signatures_digest)
        self._checker = PageChecker(trust, relied, self._reader)
        self._tree_upto = _upto(setup["tree_upto"])
        self._sigs_upto = _upto(setup["sigs_upto"])
        self._tree_cut, self._sigs_cut = setup["tree_cut"], setup["sigs_cut"]
        self._marks = frozenset(setup["marks"])

    def page(self, lo: int, hi: int) -> PageResult | None:
        rows = self._reader.read_rows(lo - 1, hi)
        if not rows:
            return None
        parsed = parse_page([row.body for row in rows])
        contents = self._reader.content_digests(referenced(parsed), newest_refs(parsed))
        checker = self._checker
        checker.start(rows[0])
        checker.feed_page(rows, parsed, contents)
        del parsed
        leaves: list[bytes | None] = []
        cut = 0
        if self._tree_upto >= lo:
            leaves = [leaf_of(r.hash) for r in rows if r.seq <= self._tree_upto]
            cut = sum(1 for r in rows if r.seq <= self._tree_cut)
        before, after = b"", b""
        if self._sigs_upto >= lo:
            line = SignaturesDigest.line
            folded = [r for r in rows if r.seq <= self._sigs_upto]
            before = b"".join(line(r.seq, r.key_id, r.signature) for r in folded
                              if r.seq <= self._sigs_cut)  # fmt: skip
            after = b"".join(line(r.seq, r.key_id, r.signature) for r in folded
                             if r.seq > self._sigs_cut)  # fmt: skip
        first, last = rows[0], rows[-1]
        return (
            checker.count, checker.bytes, first.seq, first.prev_hash, last.seq, last.hash,
            checker.found, checker.stream.fed, checker.unsigned_allowed,
            {r.seq: r.hash for r in rows if r.seq in self._marks},
            leaves, cut, before, after,
        )  # fmt: skip

    def close(self) -> None:
        self._backend.writer.dispose()
        self._backend.reader.dispose()


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """A worker: the setup first, then ``(lo, hi)`` ranges until the pipe closes; each is
    answered with ``("page", PageResult or None)`` or ``("error", reason)``."""
    worker = None
    try:
        worker = Worker(marshal.load(inp))  # noqa: S302 - our parent's pipe
        # The page's objects hold no cycles; with the setup set aside, the cyclic
        # collector's passes over them would only cost time.
        gc.freeze()
        gc.disable()
        while True:
            try:
                lo, hi = marshal.load(inp)  # noqa: S302 - our parent's pipe
            except EOFError:
                return
            marshal.dump(("page", worker.page(lo, hi)), out)
            out.flush()
    except Exception as exc:  # noqa: BLE001 - said to the parent in one line, which raises it
        reason = str(exc).strip().splitlines()
        marshal.dump(("error", f"{type(exc).__name__}: {reason[0] if reason else ''}"), out)
        out.flush()
    finally:
        if worker is not None:
            worker.close()
