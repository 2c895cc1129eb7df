"""Log format 2 (PostgreSQL): its integrator, and the heads and receipts proven on its checkpoints.

    from audit.sequenced import Integrator, integrated_checkpoint
    Integrator(store, key).step()                              # link, extend the tree, sign
    head = integrated_checkpoint(store, key, [integrator_hex])  # `audit checkpoint` on format 2

The store appends in format 2 through its log format (audit.store._log_format), and verify
walks it (audit.verify._sequenced); docs/scaling.md describes the format.

Each name loads on first use (as the ``audit`` face does), so that importing one module of
this room does not import the others.
"""

import typing as _typing

from audit.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from audit.sequenced.head import integrated_checkpoint
    from audit.sequenced.integrator import Integrator, Step
    from audit.sequenced.receipts import (
        IntegrationPending,
        integrated_head,
        make_integrated_receipt,
        rebuild_integrated_tree,
    )

# Where each name that loads on first use lives.
_LAZY = {
    "integrated_checkpoint": "audit.sequenced.head",
    "Integrator": "audit.sequenced.integrator",
    "Step": "audit.sequenced.integrator",
    "IntegrationPending": "audit.sequenced.receipts",
    "integrated_head": "audit.sequenced.receipts",
    "make_integrated_receipt": "audit.sequenced.receipts",
    "rebuild_integrated_tree": "audit.sequenced.receipts",
}

__all__ = [
    "IntegrationPending",
    "Integrator",
    "Step",
    "integrated_checkpoint",
    "integrated_head",
    "make_integrated_receipt",
    "rebuild_integrated_tree",
]


__getattr__ = _lazy_names(__name__, _LAZY)
