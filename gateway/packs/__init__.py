"""Evidence packs: one folder per regulator's question, built from the audit log.

    result = build_pack(settings, "sec-17a-4", date(2026, 9, 1), date(2026, 11, 30),
                        Path("pack"), reviewer="a.auditor")

``REGIMES`` lists the regimes, what each asks and where it says so (docs/evidence.md).
"""

from gateway.packs._build import PackResult, build_pack
from gateway.packs._regimes import REGIMES, Item, Regime

__all__ = ["REGIMES", "Item", "PackResult", "Regime", "build_pack"]
