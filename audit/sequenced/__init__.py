"""Log format 2 (PostgreSQL): its integrator, and the heads and receipts proven on its checkpoints.

    from audit.sequenced import Integrator, integrated_checkpoint
    Integrator(store, key).step()                              # link, extend the tree, sign
    head = integrated_checkpoint(store, key, [integrator_hex])  # `audit checkpoint` on format 2

The store appends in format 2 through its log format (audit.store._log_format), and verify
walks it (audit.verify._sequenced); docs/scaling.md describes the format.
"""

from audit.sequenced.head import integrated_checkpoint
from audit.sequenced.integrator import Integrator, Step
from audit.sequenced.receipts import (
    IntegrationPending,
    integrated_head,
    make_integrated_receipt,
    rebuild_integrated_tree,
)

__all__ = [
    "IntegrationPending",
    "Integrator",
    "Step",
    "integrated_checkpoint",
    "integrated_head",
    "make_integrated_receipt",
    "rebuild_integrated_tree",
]
