"""Verify: walk the log's chain, check each request's life and every record signature.

    from audit.verify import verify_log
    report = verify_log(store, trust=trust)      # a VerifyReport: report.ok, report.defects

``check_event`` and ``check_outcome`` are the read path's check of one event before it is
used (audit.verify.authenticity).

Each name loads on first use (as the ``audit`` face does), so that importing one module of
this room does not import the others.
"""

import typing as _typing

from audit.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from audit.verify._walk import check_checkpoint, verify_log
    from audit.verify.authenticity import check_event, check_outcome

# Where each name that loads on first use lives.
_LAZY = {
    "check_checkpoint": "audit.verify._walk",
    "verify_log": "audit.verify._walk",
    "check_event": "audit.verify.authenticity",
    "check_outcome": "audit.verify.authenticity",
}

__all__ = ["check_checkpoint", "check_event", "check_outcome", "verify_log"]


__getattr__ = _lazy_names(__name__, _LAZY)
