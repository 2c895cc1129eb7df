"""What every command shares to read its options and show its results.

    @click.option("--since", callback=parse_when)              # ISO 8601, naive means UTC
    ...
    echo_json(report.model_dump(mode="json"))
    click.echo(text_table(["TASK", "MODEL"], rows))
    with open_output(path) as out, Progress("verifying", threshold=20_000) as progress:
        ...

Nothing here knows a command: a helper two commands need lives here, never in one of them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TextIO

import click

from gateway.errors import InputError

if TYPE_CHECKING:  # click.progressbar's return type lives in a private module
    from click._termui_impl import ProgressBar

__all__ = ["Progress", "echo_json", "echo_jsonl", "open_output", "parse_when", "text_table"]


def parse_when(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    """A click callback: an ISO 8601 date or time, UTC when it names no zone."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 date or time") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@contextmanager
def open_output(path: Path | None) -> Iterator[TextIO]:
    """The file at ``path`` for writing, or stdout when there is none."""
    if path is None:
        yield sys.stdout
        return
    try:
        with path.open("w", encoding="utf-8", newline="") as fh:
            yield fh
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}.") from None


def echo_json(value: Any, *, err: bool = False) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False), err=err)


def echo_jsonl(values: Iterable[Any]) -> None:
    for value in values:
        click.echo(json.dumps(value, ensure_ascii=False))


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain aligned columns: readable in a terminal, a ticket or an e-mail."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


class Progress:
    """A ``progress(done, total)`` callback that draws a bar on stderr.

        with Progress("verifying", threshold=20_000) as progress:
            report = auditing.verify(progress=progress)

    The bar opens on the first report, once the total is known, and only for work of at
    least ``threshold`` steps: below that it would be over before it is worth drawing.
    """

    def __init__(self, label: str, *, threshold: int = 0) -> None:
        self._label = label
        self._threshold = threshold
        self._stack = ExitStack()
        self._bar: ProgressBar[int] | None = None
        self._shown = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.close()

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if total < self._threshold:
                return
            bar = click.progressbar(length=total, label=self._label, file=sys.stderr)
            self._bar = self._stack.enter_context(bar)
        self._bar.update(done - self._shown)
        self._shown = done
