"""The checks a regime's items are made of, each judged from the period's facts.

    verdict = INTACT(facts)      # Verdict(status="pass", evidence="the log verifies: ...")

A check says pass or fail and, in words a compliance officer reads, the evidence behind the
verdict with its counts and dates; "manual" where the log cannot show the answer (a clock's
time source, say) and what to attach instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from gateway.packs._facts import Facts


class Verdict(NamedTuple):
    status: str  # pass, fail, manual
    evidence: str


Check = Callable[[Facts], Verdict]


def _day(facts: Facts) -> str:
    first = f"{facts.first_at:%Y-%m-%d %H:%M}" if facts.first_at else "-"
    last = f"{facts.last_at:%Y-%m-%d %H:%M}" if facts.last_at else "-"
    return f"first {first} UTC, last {last} UTC"


def intact(facts: Facts) -> Verdict:
    v = facts.verify
    keys = ", ".join(k.key_id for k in v.trusted_keys) or "none"
    if v.ok and v.signatures_checked:
        return Verdict(
            "pass",
            f"the whole log (seq 1 to {v.head_seq}, {v.events_checked} events) verifies: every "
            f"hash, link and record signature checks out (keys {keys}).",
        )
    return Verdict(
        "fail",
        f"verify found {len(v.defects)} defect(s) in {v.events_checked} events"
        + ("" if v.signatures_checked else "; record signatures were not checked"),
    )


def complete(facts: Facts) -> Verdict:
    s = facts.statuses
    open_ = s["incomplete"]
    detail = (
        f"{facts.calls} model call(s) in the period ({_day(facts)}): {s['completed']} "
        f"completed, {s['flagged']} flagged, {s['failed']} failed, {s['rejected']} rejected "
        f"by policy, {s['cancelled']} cancelled, {s['cache hit']} served from the record; "
        f"{open_} without an outcome"
    )
    return Verdict("pass" if open_ == 0 else "fail", detail + ".")


def time_stamped(facts: Facts) -> Verdict:
    if facts.time_regressions:
        return Verdict(
            "fail",
            f"{facts.time_regressions} request(s) carry an earlier time than the one before "
            "them in the log's order: the clock stepped back.",
        )
    return Verdict(
        "pass",
        "every event carries a UTC time (microseconds) inside its signed body, and times rise "
        f"with the log's order ({_day(facts)}).",
    )


def clock_source(facts: Facts) -> Verdict:
    return Verdict(
        "manual",
        "times come from the gateway host's clock; the log cannot show which reference it is "
        "synchronised to. Attach the hosts' NTP/PTP configuration; "
        + (
            "no step back was found in the period."
            if not facts.time_regressions
            else f"{facts.time_regressions} step(s) back were found."
        ),
    )


def re_creatable(facts: Facts) -> Verdict:
    e = facts.export
    if not e.ok:
        return Verdict("fail", f"the period's export has {len(e.defects)} defect(s).")
    held = (
        f"export.jsonl holds the period's {e.events_checked} events with their signed bodies "
        f"(seq {e.first_seq}-{e.last_seq}) and verifies offline with verify_evidence.py and "
        "public-keys.json, without the gateway"
    )
    if e.content_included:
        return Verdict(
            "pass",
            f"{held}; it carries the prompts and answers of {e.content_checked} request(s), "
            "each checked against the digests its signed events name.",
        )
    return Verdict(
        "manual",
        f"{held}; the prompts and answers themselves are not in this pack (they stay in the "
        "audit database): build it with --with-content to include them.",
    )


def third_party(facts: Facts) -> Verdict:
    if "checkpoint.json" not in facts.files:
        return Verdict(
            "fail",
            "no signed checkpoint: GATEWAY_CHECKPOINT_KEY is not set, so no head signed apart "
            "from the record key shows that the log was not cut short or rolled back later.",
        )
    receipts = sum(1 for f in facts.files if f.startswith("receipts/"))
    return Verdict(
        "pass",
        "checkpoint.json signs the log's head with the checkpoint key; "
        f"{receipts} receipt(s) prove sample requests into it; public-keys.json and "
        "verify_evidence.py let an outside party check both.",
    )


def failures_detected(facts: Facts) -> Verdict:
    s = facts.statuses
    alerts = s["integrity alert"]
    if alerts or s["incomplete"]:
        return Verdict(
            "fail",
            f"{alerts} integrity alert(s) (a record that did not check out when read) and "
            f"{s['incomplete']} request(s) without an outcome were recorded: review each.",
        )
    return Verdict(
        "pass",
        "no model call is made without a committed record (the gateway fails closed), and "
        "in the period no integrity alert and no request without an outcome was recorded.",
    )


def reads_recorded(facts: Facts) -> Verdict:
    s = facts.statuses
    return Verdict(
        "pass",
        f"every read of recorded content is itself recorded: {s['access']} content read(s) "
        f"and {s['export']} export(s) in the period, each naming the reviewer.",
    )


def models_used(facts: Facts) -> Verdict:
    if not facts.models:
        return Verdict("fail", "no model call with a recorded model in the period.")
    parts = [
        f"{m} ({d['calls']} call(s), tasks {', '.join(sorted(d['tasks']))}, "
        f"{d['first']:%Y-%m-%d} to {d['last']:%Y-%m-%d})"
        for m, d in sorted(facts.models.items())
    ]
    return Verdict("pass", "models that answered: " + "; ".join(parts) + ".")


def changes_over_time(facts: Facts) -> Verdict:
    if not facts.versions:
        return Verdict("fail", "no policy version is recorded for the period's calls.")
    parts = []
    for task, versions in sorted(facts.versions.items()):
        spans = ", ".join(
            f"{fp[:19]}… {d['first']:%Y-%m-%d} to {d['last']:%Y-%m-%d} ({d['calls']})"
            for fp, d in sorted(versions.items(), key=lambda kv: kv[1]["first"])
        )
        parts.append(f"{task}: {len(versions)} version(s): {spans}")
    return Verdict("pass", "; ".join(parts) + ".")


def supervised(facts: Facts) -> Verdict:
    s = facts.statuses
    flagged, alerts = s["flagged"], s["answer alert"]
    return Verdict(
        "pass" if facts.calls else "fail",
        f"every answer is checked as it is recorded: {flagged} flagged by its output check, "
        f"{alerts} answer alert(s) (an answer that differs from what its policy pinned), "
        f"{s['rejected']} request(s) refused by policy, out of {facts.calls} call(s).",
    )


def approvals(facts: Facts) -> Verdict:
    count = facts.statuses["approval"]
    return Verdict(
        "pass" if count else "manual",
        f"{count} signed policy approval(s) recorded in the period"
        + ("." if count else "; attach the sign-off sheets of the versions in force."),
    )
