"""What every command shares to read its options and show its results.

    @click.option("--since", callback=parse_when)              # ISO 8601, naive means UTC
    ...
    echo_json(report.model_dump(mode="json"))                  # exact values
    click.echo(text_table(["TASK", "MODEL"], rows))             # every cell made terminal-safe
    click.echo(f"task {shown(event.task)}")                     # any other untrusted text
    with open_output(path) as out, Progress("verifying", threshold=20_000) as progress:
        ...

Nothing here knows a command: a helper two commands need lives here, never in one of them.

Text output goes to a person's terminal, so every value that came from outside (a caller or
task name, a file name, a model id, a recorded reason) passes through :func:`shown` first: a
control character, an escape sequence, a bidi override or a zero-width character would let
a value hide or fake rows, so it is written visibly as ``\\x1b``, ``\\u202e``, ``\\u200b``.
JSON output keeps the exact values; JSON's own escaping is what makes it safe.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TextIO

import click

from gateway.errors import InputError

if TYPE_CHECKING:  # click.progressbar's return type lives in a private module
    from click._termui_impl import ProgressBar

__all__ = [
    "UNTIL_HELP",
    "Progress",
    "echo_json",
    "echo_jsonl",
    "open_output",
    "parse_until",
    "parse_when",
    "shown",
    "shown_lines",
    "text_table",
]


def _escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown(value: object) -> str:
    """``value`` as text a terminal cannot misread: no character in it can act or hide.

    Escaped are exactly the characters ``str.isprintable`` refuses: controls (Cc, with ESC,
    CR, LF, DEL and the C1 controls), format characters (Cf: zero-width, bidi overrides and
    isolates), lone surrogates (Cs), private-use (Co) and unassigned (Cn) code points, line
    and paragraph separators (Zl, Zp) and every space other than U+0020 (Zs).
    """
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def shown_lines(text: str) -> str:
    """Like :func:`shown`, but keeps the line breaks of text whose lines are its structure
    (indented JSON, whose strings carry their own newlines escaped)."""
    return "\n".join(shown(line) for line in text.split("\n"))


def parse_when(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    """A click callback: an ISO 8601 date or time, UTC when it names no zone."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 date or time") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


UNTIL_HELP = "Up to this UTC time (ISO 8601), exclusive; a date alone includes that whole day."


def parse_until(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """A click callback for an exclusive upper bound: like :func:`parse_when`, but a bare
    date names the whole day (``--until 2026-11-30`` includes 30 November), because that is
    what a reviewer who types a date means."""
    moment = parse_when(ctx, param, value)
    if moment is None or value is None or not _bare_date(value):
        return moment
    return moment + timedelta(days=1)


def _bare_date(value: str) -> bool:
    try:
        date.fromisoformat(value.strip())
    except ValueError:
        return False
    return True


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
    """Plain aligned columns: readable in a terminal, a ticket or an e-mail; every cell shown."""
    cells = [[shown(h) for h in headers], *[[shown(c) for c in row] for row in rows]]
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
