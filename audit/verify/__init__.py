"""Verify: walk the log's chain, check each request's life and every record signature.

    from audit.verify import verify_log
    report = verify_log(store, trust=trust)      # a VerifyReport: report.ok, report.defects

``check_event`` and ``check_outcome`` are the read path's check of one event before it is
used (audit.verify.authenticity).
"""

from audit.verify._walk import check_checkpoint, verify_log
from audit.verify.authenticity import check_event, check_outcome

__all__ = ["check_checkpoint", "check_event", "check_outcome", "verify_log"]
