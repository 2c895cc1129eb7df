"""The AnswerAlertWarning a library caller gets for an answer with alerts, pointing at the
caller's own line (the ``gw.complete(...)`` call, or the loop over a stream).

    warn_of_alerts(prepared.plan.task, result)     # nothing for an answer without alerts

Raised where the caller's frames are on the stack: in the caller's thread for ``Gateway``, on
the event loop for ``AsyncGateway`` (never in a worker thread, whose stack holds none of the
caller's frames). The warning's location is the first frame outside this package, however
deep the call went inside it, so ``warnings.filterwarnings(..., module=...)`` and the printed
file and line name the caller's code.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

from gateway.errors import AnswerAlertWarning
from gateway.result import Result

__all__ = ["warn_of_alerts"]

_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep


def warn_of_alerts(task: str, result: Result) -> None:
    if not result.alerts:
        return
    checks = result.alerts
    warnings.warn(
        AnswerAlertWarning(
            f"the answer to request {result.request_id} differs from what task {task!r}'s "
            f"policy pinned ({', '.join(checks)}); it is recorded at seq {result.seq} with an "
            f"answer alert.",
            request_id=result.request_id,
            seq=result.seq,
            checks=checks,
        ),
        stacklevel=_levels_to_caller(),
    )


def _levels_to_caller() -> int:
    """The ``stacklevel`` of the first frame outside this package, as seen from the
    ``warnings.warn`` call in :func:`warn_of_alerts` (level 1)."""
    frame = sys._getframe(2)  # warn_of_alerts's caller: level 2
    level = 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    return level
