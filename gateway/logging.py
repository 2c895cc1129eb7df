"""structlog setup, called by entry points only (the CLI, benchmarks), never by the library.

    from gateway.logging import configure_logging
    configure_logging()              # one JSON object per line on stderr

The library only calls ``structlog.get_logger("gateway")`` and logs facts about a request
(task, ids, timings, token counts); prompt and response text are never logged.
"""

from __future__ import annotations

import logging
import sys

import structlog


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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # ANTHROPIC_LOG=debug would make the SDK log request options, prompt text included.
    for name in ("anthropic", "httpx", "httpx2", "httpcore", "httpcore2"):
        logging.getLogger(name).setLevel(logging.WARNING)
