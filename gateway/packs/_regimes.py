"""The regimes a pack answers for: what each asks, where it says so, and the items that show it.

    regime = REGIMES["dora"]
    for item in regime.items: item.check(facts)        # a Verdict each

Each requirement names its source; docs/evidence.md is the same table for a reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from gateway.packs import _items as c


class Item(NamedTuple):
    key: str
    asks: str  # the requirement in plain words
    source: str  # where the regime says it
    check: c.Check


class Regime(NamedTuple):
    key: str
    title: str
    summary: str  # what the regime asks, for a non-engineer
    sources: tuple[str, ...]
    items: tuple[Item, ...]


_SEC = "SEC Rule 17a-4(f) (17 CFR 240.17a-4(f), as amended 2022); FINRA Rule 4511"
_DORA = "Commission Delegated Regulation (EU) 2024/1774 (DORA RTS) Art. 12(2)"
_NIST = "NIST SP 800-53 Rev. 5"
_AI = "Regulation (EU) 2024/1689 (AI Act)"
_FINRA = "FINRA Rule 3110(b)(4); FINRA Rule 2210 and its FAQs on AI-generated communications"
_MRM = "PRA SS1/23 Principle 1 (model inventory); OSFI Guideline E-23 (model inventory)"

REGIMES: Mapping[str, Regime] = MappingProxyType(
    {
        "sec-17a-4": Regime(
            "sec-17a-4",
            "Broker-dealer records: SEC 17a-4(f) and FINRA 4511",
            "Electronic records must be complete and time-stamped, kept so that any change or "
            "deletion is evident and the original can be re-created, downloadable in a usable "
            "format, and open to a regulator without the firm's help.",
            (_SEC,),
            (
                Item(
                    "complete",
                    "Every model call is recorded with its outcome.",
                    "17 CFR 240.17a-4(f)(2)(i)(A), complete audit trail; FINRA Rule 4511",
                    c.complete,
                ),
                Item(
                    "unaltered",
                    "Any modification or deletion of a record is evident.",
                    "17 CFR 240.17a-4(f)(2)(i)(A); (f)(2)(ii), verify completeness and "
                    "accuracy automatically",
                    c.intact,
                ),
                Item(
                    "time-stamped",
                    "Each record carries the date and time it was made.",
                    "17 CFR 240.17a-4(f)(2)(i)(A), time-stamped audit trail",
                    c.time_stamped,
                ),
                Item(
                    "re-creatable",
                    "The original record can be re-created and downloaded in a usable format.",
                    "17 CFR 240.17a-4(f)(2)(i)(A) and (f)(2)(iv)",
                    c.re_creatable,
                ),
                Item(
                    "third-party",
                    "A party outside the firm can check the records.",
                    "17 CFR 240.17a-4(f)(3)(iii) (undertaking to furnish records)",
                    c.third_party,
                ),
            ),
        ),
        "dora": Regime(
            "dora",
            "ICT logging: DORA RTS Art. 12 and NIST 800-53 AU-5/AU-8/AU-9",
            "Logs must be protected against tampering, deletion and unauthorised access, "
            "failures of logging must be detected, and times must come from a reliable "
            "synchronised clock.",
            (_DORA, _NIST),
            (
                Item(
                    "tamper-protection",
                    "Log records are protected against tampering and "
                    "deletion, and any change is found.",
                    f"{_DORA}; {_NIST} AU-9",
                    c.intact,
                ),
                Item(
                    "signed-head",
                    "A signed head held apart shows the log was not cut short or rolled back.",
                    f"{_NIST} AU-9(3) (cryptographic protection)",
                    c.third_party,
                ),
                Item(
                    "failure-detection",
                    "Failures of logging are detected and acted on.",
                    f"{_NIST} AU-5",
                    c.failures_detected,
                ),
                Item(
                    "access",
                    "Access to log information is controlled and recorded.",
                    f"{_DORA}; {_NIST} AU-9(4)",
                    c.reads_recorded,
                ),
                Item(
                    "time-stamps",
                    "Records carry time-stamps in order.",
                    f"{_NIST} AU-8",
                    c.time_stamped,
                ),
                Item(
                    "clock-source",
                    "Clocks are synchronised to a documented reliable reference time source.",
                    f"{_DORA}; {_NIST} AU-8",
                    c.clock_source,
                ),
            ),
        ),
        "ai-act": Regime(
            "ai-act",
            "Records of AI use: EU AI Act Art. 12/19 and ESMA (2024)",
            "Automatic logs over the system's lifetime that show when it was used, which model "
            "answered and how the system changed over time, kept and available to authorities.",
            (_AI, "ESMA public statement on AI in investment services (30 May 2024), ¶24"),
            (
                Item(
                    "use-logged",
                    "Each use of the AI system is logged automatically.",
                    f"{_AI} Art. 12(1)",
                    c.complete,
                ),
                Item(
                    "models",
                    "The models used are identified.",
                    f"{_AI} Art. 12(2); ESMA 2024 ¶24",
                    c.models_used,
                ),
                Item(
                    "changes",
                    "Changes to the system over time are recorded.",
                    f"{_AI} Art. 12(2)(b); ESMA 2024 ¶24",
                    c.changes_over_time,
                ),
                Item(
                    "kept-intact",
                    "Logs are kept and cannot be silently altered.",
                    f"{_AI} Art. 19(1)",
                    c.intact,
                ),
            ),
        ),
        "finra-supervision": Regime(
            "finra-supervision",
            "Supervision of AI-generated communications: FINRA 3110(b)(4) and 2210",
            "The firm reviews AI-generated communications, approves what it lets the model "
            "say, and keeps evidence of that review and of who read the records.",
            (_FINRA,),
            (
                Item(
                    "reviewed",
                    "AI-generated answers are reviewed; exceptions are flagged.",
                    "FINRA Rule 3110(b)(4)",
                    c.supervised,
                ),
                Item(
                    "approved",
                    "What the model may say is approved by a principal.",
                    "FINRA Rule 2210(b)(1); 2210 FAQs on AI",
                    c.approvals,
                ),
                Item(
                    "reviewer-access",
                    "Reviewers' access to the records is recorded.",
                    "FINRA Rule 3110(b)(4)",
                    c.reads_recorded,
                ),
                Item(
                    "records-kept",
                    "The communications are kept unaltered.",
                    "FINRA Rule 4511; SEC Rule 17a-4(b)(4)",
                    c.intact,
                ),
            ),
        ),
        "model-inventory": Regime(
            "model-inventory",
            "Model inventory: PRA SS1/23 and OSFI E-23",
            "An inventory of every model in use, where it is used, since when, and under which "
            "approved version, kept current and complete.",
            (_MRM,),
            (
                Item(
                    "inventory", "Every model in use, with its uses and dates.", _MRM, c.models_used
                ),
                Item(
                    "versions",
                    "Each use's approved version and its changes.",
                    _MRM,
                    c.changes_over_time,
                ),
                Item("approvals", "Approvals of the versions in use.", _MRM, c.approvals),
                Item(
                    "complete",
                    "The inventory rests on a complete, unaltered record.",
                    _MRM,
                    c.intact,
                ),
            ),
        ),
    }
)
