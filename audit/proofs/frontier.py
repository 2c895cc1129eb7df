"""The right edge of the log's Merkle tree, kept in memory from the event hashes themselves.

    edge = Frontier()
    edge.add(event_leaf(event_hash))       # leaf after leaf, in seq order
    edge.root()                            # the RFC 6962 root of the leaves added so far
    edge = Frontier.of_log(reader, upto)   # from events 1..upto, streamed in pages

Who signs a root must compute it from the leaves it vouches for, not read it from
``merkle_nodes``: that table is derived, and a node planted in it (ahead of its leaves, or
under a position the stored size then claims) would make a stored root that agrees with its
own proofs and with nothing else. The frontier is the complete subtrees of the leaves seen
(at most log2(n) hashes), so it costs O(log n) memory and one hash per leaf on average.
The integrator signs its checkpoints' roots from one; verify folds one as it walks and
compares every format-2 checkpoint's root with it.
"""

from __future__ import annotations

from sqlalchemy import Engine, text

from audit.errors import CheckpointError
from audit.proofs.merkle import EMPTY_ROOT, event_leaf, node_hash

PAGE = 20_000  # hash-column rows read at a time while a frontier is rebuilt from the log


class FrontierError(CheckpointError):
    """The log's hashes cannot be folded: a seq is missing or a hash is not one."""


class Frontier:
    """The complete subtrees of the first :attr:`size` leaves, largest (leftmost) first."""

    __slots__ = ("_stack", "size")

    def __init__(self) -> None:
        self._stack: list[tuple[int, bytes]] = []  # (level, hash)
        self.size = 0

    def add(self, leaf: bytes) -> None:
        level, node = 0, leaf
        while self._stack and self._stack[-1][0] == level:
            _, left = self._stack.pop()
            level, node = level + 1, node_hash(left, node)
        self._stack.append((level, node))
        self.size += 1

    def add_hash(self, seq: int, event_hash: str) -> None:
        """Add the leaf of event ``seq`` (which must be the next one) from its ``hash``."""
        if seq != self.size + 1:
            raise FrontierError(
                f"seq {self.size + 1} is missing from the log: its Merkle root cannot be computed.",
                hint="Run `gateway audit verify`; the log is not whole.",
            )
        try:
            self.add(event_leaf(event_hash))
        except ValueError:
            raise FrontierError(
                f"the hash of seq {seq} is not a sha256 hash: the log's Merkle root cannot be "
                "computed past it.",
                hint="Run `gateway audit verify`; the row was altered.",
            ) from None

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        acc = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            acc = node_hash(left, acc)
        return acc

    def extend_from_log(self, reader: Engine, upto: int, page: int = PAGE) -> None:
        """Add the leaves of events ``size + 1 .. upto`` from the ``hash`` column, in keyset
        pages (flat memory): :class:`FrontierError` if one is missing or not a hash."""
        while self.size < upto:
            with reader.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT seq, hash FROM events WHERE seq > :a AND seq <= :b "
                        "ORDER BY seq LIMIT :n"
                    ),
                    {"a": self.size, "b": upto, "n": page},
                ).all()
            if not rows:
                raise FrontierError(
                    f"seq {self.size + 1} is missing from the log: its Merkle root cannot be "
                    "computed.",
                    hint="Run `gateway audit verify`; the log is not whole.",
                )
            for seq, event_hash in rows:
                self.add_hash(int(seq), str(event_hash))

    @classmethod
    def of_log(cls, reader: Engine, upto: int) -> Frontier:
        edge = cls()
        edge.extend_from_log(reader, upto)
        return edge
