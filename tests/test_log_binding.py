"""The library log binds structlog's logger once per configuration, and follows a new one."""

from __future__ import annotations

import io
import json

import structlog

from gateway._log import log


def _configure(out: io.StringIO) -> None:
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(20),
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def test_events_follow_each_new_configuration() -> None:
    first, second = io.StringIO(), io.StringIO()
    _configure(first)
    log.info("one", seq=1)
    log.info("two", seq=2)
    _configure(second)  # a host (or a test) configures again: the next event goes there
    log.info("three", seq=3)
    assert [json.loads(line)["event"] for line in first.getvalue().splitlines()] == [
        "one",
        "two",
    ]
    assert json.loads(second.getvalue())["seq"] == 3
    structlog.reset_defaults()
    log.warning("four")  # unconfigured: the standard library logger, silent by default
    assert "four" not in first.getvalue() + second.getvalue()
