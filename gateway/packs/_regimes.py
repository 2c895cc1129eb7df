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


# Each source was checked against public text on 2026-12-02 (docs/evidence.md, "Sources
# checked"); "[unconfirmed]" marks a paragraph number or paragraph that review could not
# confirm against the primary text: the requirement is taken from it, its number is not.
_SEC = (
    "SEC Rule 17a-4(f) (17 CFR 240.17a-4(f)) as amended by Release No. 34-96034 (adopted "
    "12 October 2022, compliance date 3 May 2023: the audit-trail alternative to WORM); "
    "FINRA Rule 4511"
)
_SEC_TRAIL = "17 CFR 240.17a-4(f)(2)(i)(A) [unconfirmed], complete time-stamped audit trail"
_DORA = "Commission Delegated Regulation (EU) 2024/1774 (DORA RTS on ICT risk management) Art. 12"
_NIST = "NIST SP 800-53 Rev. 5"
_AI = "Regulation (EU) 2024/1689 (AI Act)"
_ESMA = (
    "ESMA public statement on the use of AI in the provision of retail investment services "
    "(ESMA35-335435667-5924, 30 May 2024), record keeping ¶24 [unconfirmed]"
)
_FINRA = (
    "FINRA Rule 3110(b)(4) and Supplementary Material .06-.09; FINRA Rule 2210; the FINRA "
    "Advertising Regulation FAQs on AI-generated communications and chatbots (May 2024)"
)
_MRM = (
    "PRA SS1/23 Principle 1 (model identification and model risk classification: the model "
    "inventory); OSFI Guideline E-23 (2025, in force 1 May 2027: the model inventory); "
    "Federal Reserve/OCC SR 11-7 (2011: the model inventory)"
)

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
                    f"{_SEC_TRAIL}; FINRA Rule 4511",
                    c.complete,
                ),
                Item(
                    "unaltered",
                    "Any modification or deletion of a record is evident.",
                    f"{_SEC_TRAIL} of all modifications and deletions; 17 CFR "
                    "240.17a-4(f)(2)(ii) [unconfirmed], verify automatically the completeness and "
                    "accuracy of the storing processes",
                    c.intact,
                ),
                Item(
                    "time-stamped",
                    "Each record carries the date and time it was made.",
                    f"{_SEC_TRAIL}: the date and time of actions that create, modify or delete",
                    c.time_stamped,
                ),
                Item(
                    "re-creatable",
                    "The original record can be re-created and downloaded in a usable format.",
                    f"{_SEC_TRAIL}, permitting re-creation of the original; 17 CFR "
                    "240.17a-4(f)(2)(iv) [unconfirmed], download and transfer in a human "
                    "readable and a reasonably usable electronic format",
                    c.re_creatable,
                ),
                Item(
                    "third-party",
                    "A party outside the firm can check the records.",
                    "17 CFR 240.17a-4(f) as amended: a designated third party's or designated "
                    "executive officer's undertaking to furnish the records (paragraph "
                    "[unconfirmed]); 17a-4(i), third parties holding records",
                    c.third_party,
                ),
            ),
        ),
        "dora": Regime(
            "dora",
            "ICT logging: DORA RTS Art. 12(2) and NIST 800-53 AU-5/AU-8/AU-9/SC-45",
            "Logs must be protected against tampering, deletion and unauthorised access, "
            "failures of logging must be detected, and times must come from a reliable "
            "synchronised clock.",
            (_DORA, _NIST),
            (
                Item(
                    "tamper-protection",
                    "Log records are protected against tampering and "
                    "deletion, and any change is found.",
                    f"{_DORA}(2)(d); {_NIST} AU-9",
                    c.intact,
                ),
                Item(
                    "signed-head",
                    "A signed head held apart shows the log was not cut short or rolled back.",
                    f"{_NIST} AU-9(3) (cryptographic protection of integrity)",
                    c.third_party,
                ),
                Item(
                    "failure-detection",
                    "Failures of logging are detected and acted on.",
                    f"{_DORA}(2)(e); {_NIST} AU-5",
                    c.failures_detected,
                ),
                Item(
                    "access",
                    "Access to log information is controlled and recorded.",
                    f"{_DORA}(2)(c)(i) and (2)(d); {_NIST} AU-9(4)",
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
                    f"{_DORA}(2)(f); {_NIST} SC-45(1) (AU-8(1) in Rev. 4)",
                    c.clock_source,
                ),
            ),
        ),
        "ai-act": Regime(
            "ai-act",
            "Records of AI use: EU AI Act Art. 12/19 and ESMA (2024)",
            "High-risk AI systems log events automatically over their lifetime, for traceability "
            "(risks, substantial modifications, post-market monitoring), and the logs are kept "
            "at least six months; ESMA expects investment firms to keep records of their use of "
            "AI, the algorithms used and changes over time.",
            (_AI, _ESMA),
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
                    f"{_AI} Art. 12(2) (traceability of the system's functioning); ESMA "
                    "2024, ¶24 [unconfirmed] (algorithms implemented)",
                    c.models_used,
                ),
                Item(
                    "changes",
                    "Changes to the system over time are recorded.",
                    f"{_AI} Art. 12(2)(a) (events relevant to a substantial modification); "
                    "ESMA 2024, ¶24 [unconfirmed] (modifications over time)",
                    c.changes_over_time,
                ),
                Item(
                    "kept-intact",
                    "Logs are kept (at least six months) and any alteration is evident.",
                    f"{_AI} Art. 19(1) (providers) and Art. 26(6) (deployers)",
                    c.intact,
                ),
            ),
        ),
        "finra-supervision": Regime(
            "finra-supervision",
            "Supervision of AI-generated communications: FINRA 3110(b)(4) and 2210",
            "AI-generated communications are supervised like any other: reviewed under the "
            "firm's written procedures (with evidence of who reviewed what, and when), retail "
            "communications approved by a principal, and the records kept.",
            (_FINRA,),
            (
                Item(
                    "reviewed",
                    "AI-generated answers are reviewed; exceptions are flagged.",
                    "FINRA Rule 3110(b)(4); FINRA AI FAQs (May 2024)",
                    c.supervised,
                ),
                Item(
                    "approved",
                    "What the model may say (its policy) is approved by named approvers; a "
                    "principal's approval of each retail communication is not shown by this.",
                    "FINRA Rule 2210(b)(1); FINRA AI FAQs (May 2024)",
                    c.approvals,
                ),
                Item(
                    "reviewer-access",
                    "Reviewers' reads of the records are recorded (who, what, when); opening a "
                    "record is not by itself a review.",
                    "FINRA Rule 3110.07 (evidence of review: reviewer, material, date)",
                    c.reads_recorded,
                ),
                Item(
                    "records-kept",
                    "The communications are kept unaltered.",
                    "FINRA Rule 4511; FINRA Rule 3110.09 (kept under SEA Rule 17a-4); SEC "
                    "Rule 17a-4(b)(4) [unconfirmed]",
                    c.intact,
                ),
            ),
        ),
        "model-inventory": Regime(
            "model-inventory",
            "Model inventory: PRA SS1/23, OSFI E-23 and SR 11-7",
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
