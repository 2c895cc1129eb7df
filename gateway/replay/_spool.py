"""A replay run's rows kept on disk, not in memory, so a run of any size prints and reports
in flat memory: each row is written as one JSON line as it is recorded, and read back (as
often as a report needs to go over them) after the run.

    with RowSpool() as spool:
        report = session.run(prepared, progress=spool.add, keep_rows=False)
        for row in spool.rows(): ...
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from types import TracebackType
from typing import Self

from gateway.replay._model import RequestReplay


class RowSpool:
    def __init__(self) -> None:
        # A temporary file the system removes even if the process dies.
        self._file = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 (closed by close)
        self.count = 0

    def add(self, row: RequestReplay) -> None:
        self._file.write(row.model_dump_json() + "\n")
        self.count += 1

    def rows(self) -> Iterator[RequestReplay]:
        """Every row added, in order; each call reads the spool from its start."""
        self._file.flush()
        self._file.seek(0)
        for line in self._file:
            yield RequestReplay.model_validate_json(line)
        self._file.seek(0, 2)  # back to the end, should more rows be added

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
