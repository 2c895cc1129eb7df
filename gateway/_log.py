"""The library's log: quiet unless the host application asked for logs.

    from gateway._log import log
    log.info("request_completed", task="compliance_review", request_id="req_...", seq=12)

A library must not print: structlog's unconfigured default writes every event to stdout. So
an event goes through structlog only when the host (or a gateway entry point, see
gateway.logging) configured structlog; otherwise it goes to the standard library logger
``gateway``, which carries a NullHandler and so stays silent unless the host configured
``logging`` (``logging.basicConfig(level="INFO")`` shows the events on stderr).

Events carry facts about a request (task, ids, timings, token counts); prompt and response
text never go into one.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

_stdlib = logging.getLogger("gateway")
_stdlib.addHandler(logging.NullHandler())


Observer = Callable[[str, dict[str, Any]], None]


class _Log:
    """The one log. Observers (``gateway serve``'s metrics) see every event with its fields,
    whatever the log level, before it is filtered and rendered."""

    def __init__(self) -> None:
        self._observers: tuple[Observer, ...] = ()
        # structlog's logger bound once per configuration (its processors, wrapper, factory
        # and context class, by identity): ``get_logger(...).info`` builds and binds a new
        # one on every event when the configuration does not cache it (gateway.logging's).
        self._bound: Any = None
        self._bound_for: tuple[object, ...] = ()

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Call ``observer(event, fields)`` for each event from now on; returns its undo."""
        self._observers = (*self._observers, observer)

        def stop() -> None:
            self._observers = tuple(o for o in self._observers if o is not observer)

        return stop

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, "error", event, fields)

    def _emit(self, level: int, method: str, event: str, fields: dict[str, Any]) -> None:
        for observer in self._observers:
            observer(event, fields)
        # Only a host that imported structlog can have configured it: a CLI command that
        # logs nothing through it starts without importing it.
        structlog = sys.modules.get("structlog")
        if structlog is not None and structlog.is_configured():
            getattr(self._structlog(structlog), method)(event, **fields)
        elif _stdlib.isEnabledFor(level):
            _stdlib.log(level, "%s %s", event, json.dumps(fields, default=str, sort_keys=True))

    def _structlog(self, structlog: Any) -> Any:
        config = structlog.get_config()
        key = (
            config["processors"],
            config["wrapper_class"],
            config["logger_factory"],
            config["context_class"],
        )
        if len(key) != len(self._bound_for) or any(
            a is not b for a, b in zip(key, self._bound_for, strict=True)
        ):
            self._bound = structlog.get_logger("gateway").bind()
            self._bound_for = key
        return self._bound


log = _Log()
