"""Logging set-up: structlog for entry points, and the guard on the SDK's loggers.

    from gateway.logging import configure_logging
    configure_logging()              # one JSON object per line on stderr

:func:`configure_logging` is called by entry points only (the CLI, benchmarks), never by the
library. The library only calls ``structlog.get_logger("gateway")`` and logs facts about a
request (task, ids, timings, token counts); prompt and response text are never logged.

The SDK and its HTTP client log at DEBUG the request options (the ``Authorization`` header,
the system prompt, the messages), and the SDK's import lowers its own loggers to DEBUG when
``ANTHROPIC_LOG=debug``. So the module that imports the SDK (:mod:`gateway.providers.wire._sdk`)
calls :func:`hold_sdk_loggers` right after that import, and each provider puts an
:class:`SdkLogGuard` holding its API key on the same loggers while it is open::

    guard = SdkLogGuard(secrets=(api_key,)).attach()
    ...
    guard.detach()

A guard sits on every SDK logger that exists, which is where the SDK's records are made, so
it applies whatever level the host sets on a logger and whatever handlers it puts on the root
(a filter on a parent logger never sees a child's records). It drops every record below
WARNING and withholds, from the rest, the secrets it holds and anything shaped like a
credential (``Bearer ...``, ``sk-ant-...``): the SDK's warnings and errors still reach the host.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterable
from typing import Self

import structlog

__all__ = ["SDK_LOGGERS", "SdkLogGuard", "configure_logging", "hold_sdk_loggers"]

# The SDK's loggers and its HTTP client's: the httpx2/httpcore2 fork it ships with, and the
# upstream names, should a release go back to them.
SDK_LOGGERS = ("anthropic", "httpx2", "httpcore2", "httpx", "httpcore")

WITHHELD = "[secret withheld]"
_CREDENTIAL = re.compile(r"\bbearer\s+[^\s'\",;]+|\bsk-ant-[A-Za-z0-9_\-]+", re.IGNORECASE)
_LOCK = threading.Lock()


def configure_logging(*, level: str = "INFO", json: bool = True) -> None:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        # One write per line (the message and its newline together): `print` writes them
        # apart, and two worker processes on one stderr then interleave mid-line.
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    hold_sdk_loggers()


class SdkLogGuard(logging.Filter):
    """Drops an SDK record below WARNING; withholds secrets and credentials from the rest."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # Longest first, so that a secret containing another is withheld whole.
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self._guarded: list[logging.Logger] = []

    def attach(self) -> Self:
        """Hold the SDK loggers at WARNING (or above) and guard each that exists now.

        Idempotent; call it again after the SDK creates more loggers (a lazily imported
        submodule) to guard those too."""
        with _LOCK:
            for logger in _existing_sdk_loggers():
                if self not in logger.filters:
                    logger.addFilter(self)
                    self._guarded.append(logger)
            for name in SDK_LOGGERS:
                top = logging.getLogger(name)
                if top.level < logging.WARNING:  # NOTSET too: it would follow a DEBUG root
                    top.setLevel(logging.WARNING)
        return self

    def detach(self) -> None:
        """Take this guard off the loggers it is on (the levels stay held). Idempotent."""
        with _LOCK:
            for logger in self._guarded:
                logger.removeFilter(self)
            self._guarded.clear()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return False
        self._withhold(record)
        return True

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, WITHHELD)
        return _CREDENTIAL.sub(WITHHELD, text)

    def _withhold(self, record: logging.LogRecord) -> None:
        try:
            message, formatted = record.getMessage(), True
        except Exception:  # noqa: BLE001 - a handler would print msg and args raw; not here
            message, formatted = f"{record.msg!s} {record.args!r}", False
        clean = self.scrub(message)
        if clean != message or not formatted:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[0] is not None:
            trace = logging.Formatter().formatException(record.exc_info)
            clean = self.scrub(trace)
            if clean != trace:  # handlers would format the exception again from exc_info
                record.exc_info, record.exc_text = None, clean
        if record.stack_info:
            record.stack_info = self.scrub(record.stack_info)


_HOLD = SdkLogGuard()


def hold_sdk_loggers() -> None:
    """Hold the SDK loggers at WARNING and put the secret-less guard on each; idempotent.

    Run right after the SDK is imported: its import-time set-up lowers them again."""
    _HOLD.attach()


def _existing_sdk_loggers() -> list[logging.Logger]:
    existing = list(logging.root.manager.loggerDict)  # one C-level copy: another thread may add
    names = {*SDK_LOGGERS, *(name for name in existing if name.partition(".")[0] in SDK_LOGGERS)}
    return [logging.getLogger(name) for name in sorted(names)]
