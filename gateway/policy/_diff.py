"""Compare two policy folders task by task, with a risk note where a change matters.

    for change in diff_policy_sets(old_set, new_set):
        print(change.task, change.status, [c.key for c in change.changes])
        for text in change.text_diffs:
            print("\n".join(text.lines))          # unified diff of a prompt or schema

Fields are compared one by one (prompt and schema by digest, with a risk note); a changed
system prompt, output schema or tool list is also given as a unified text diff, so an edit that
weakens a control (ESCALATE -> PASS) is visible. Each task carries the new side's review
findings, and for a side that does not load, its errors.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from audit.canonical import canonical_digest, digest
from gateway.policy._findings import Finding, Severity
from gateway.policy._schema import Policy
from gateway.providers.registry import capabilities

if TYPE_CHECKING:  # comparing two loaded folders is the caller's import (jsonschema, rules)
    from gateway.policy._policy_set import PolicyEntry, PolicySet

# The transport a policy without [model] transport uses: Anthropic's own API.
FIRST_PARTY = "anthropic"

EFFORT_ORDER = ("low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class FieldChange:
    key: str
    old: Any
    new: Any
    risk: str | None


@dataclass(frozen=True)
class TextDiff:
    """A unified diff of one text part of a policy (``system_prompt``, ``output_schema``,
    ``tools``; schemas and tools as indented, key-sorted JSON)."""

    key: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class SideFailure:
    """A side on which the task does not load: which side, its file, and the errors why."""

    side: Literal["old", "new"]
    file: str
    errors: tuple[Finding, ...]


@dataclass(frozen=True)
class TaskDiff:
    task: str
    status: Literal["added", "removed", "changed", "unchanged", "not-loadable"]
    changes: tuple[FieldChange, ...] = ()
    old_fingerprint: str | None = None
    new_fingerprint: str | None = None
    text_diffs: tuple[TextDiff, ...] = ()
    new_findings: tuple[Finding, ...] = ()  # the new side's review findings (what ships)
    failures: tuple[SideFailure, ...] = ()  # the sides that do not load, and why


def diff_policy_sets(old: PolicySet, new: PolicySet) -> list[TaskDiff]:
    result: list[TaskDiff] = []
    for task in sorted(set(old.tasks()) | set(new.tasks())):
        before = _loaded(old, task)
        after = _loaded(new, task)
        new_entry = new.entry(task)
        findings = new_entry.findings if new_entry is not None else ()
        failures = tuple(
            f
            for f in (_failure("old", old.entry(task)), _failure("new", new_entry))
            if f is not None
        )
        if task not in new.tasks():
            result.append(TaskDiff(task, "removed", old_fingerprint=_fp(before), failures=failures))
        elif task not in old.tasks():
            result.append(
                TaskDiff(
                    task,
                    "added",
                    new_fingerprint=_fp(after),
                    new_findings=findings,
                    failures=failures,
                )
            )
        elif before is None or after is None:
            result.append(
                TaskDiff(
                    task,
                    "not-loadable",
                    (),
                    _fp(before),
                    _fp(after),
                    _text_diffs(task, _entry_texts(old.entry(task)), _entry_texts(new_entry)),
                    findings,
                    failures,
                )
            )
        else:
            changes = _changes(before, after)
            status: Literal["changed", "unchanged"] = "changed" if changes else "unchanged"
            texts = _text_diffs(task, _texts(before), _texts(after))
            result.append(
                TaskDiff(
                    task,
                    status,
                    changes,
                    before.fingerprint,
                    after.fingerprint,
                    texts,
                    findings,
                    failures,
                )
            )
    return result


def diff_policies(old: Policy, new: Policy) -> TaskDiff:
    """Two versions of one task's policy (two recorded versions, say), field by field and
    as text, as :func:`diff_policy_sets` compares a task present on both sides."""
    changes = _changes(old, new)
    return TaskDiff(
        new.task,
        "changed" if changes else "unchanged",
        changes,
        old.fingerprint,
        new.fingerprint,
        _text_diffs(new.task, _texts(old), _texts(new)),
    )


def _failure(side: Literal["old", "new"], entry: PolicyEntry | None) -> SideFailure | None:
    if entry is None or entry.policy is not None:
        return None
    errors = tuple(f for f in entry.findings if f.severity is Severity.ERROR)
    return SideFailure(side, entry.file, errors)


def _texts(policy: Policy) -> dict[str, str | None]:
    """The parts of a policy a reviewer reads as text, in a stable form."""
    return {
        "system_prompt": policy.prompt.system,
        "output_schema": _json_text(policy.output.json_schema),
        "tools": _json_text(policy.tools.definitions),
    }


def _entry_texts(entry: PolicyEntry | None) -> dict[str, str | None]:
    # A side that does not load has no inlined prompt to compare.
    return _texts(entry.policy) if entry is not None and entry.policy is not None else {}


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _text_diffs(
    task: str, old: dict[str, str | None], new: dict[str, str | None]
) -> tuple[TextDiff, ...]:
    if not old or not new:
        return ()
    diffs = []
    for key in old:
        before, after = old[key], new.get(key)
        if before == after:
            continue
        lines = difflib.unified_diff(
            (before or "").splitlines(),
            (after or "").splitlines(),
            fromfile=f"old/{task} {key}" + ("" if before is not None else " (none)"),
            tofile=f"new/{task} {key}" + ("" if after is not None else " (none)"),
            lineterm="",
        )
        diffs.append(TextDiff(key, tuple(lines)))
    return tuple(diffs)


def _loaded(policies: PolicySet, task: str) -> Policy | None:
    entry = policies.entry(task)
    return entry.policy if entry is not None else None


def _fp(policy: Policy | None) -> str | None:
    return policy.fingerprint if policy is not None else None


def _changes(old: Policy, new: Policy) -> tuple[FieldChange, ...]:
    before, after = _flat(_comparable(old)), _flat(_comparable(new))
    keys = sorted(set(before) | set(after))
    return tuple(
        FieldChange(k, before.get(k), after.get(k), _risk(k, before.get(k), after.get(k)))
        for k in keys
        if before.get(k) != after.get(k)
    )


def _comparable(policy: Policy) -> dict[str, Any]:
    content = policy.content()
    prompt = content.pop("system_prompt")
    schema = content.pop("output_schema")
    content["system_prompt_digest"] = digest(prompt.encode()) if prompt is not None else None
    content["output_schema_digest"] = canonical_digest(schema) if schema is not None else None
    return content


def _flat(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, dict):
            out.update(_flat(item, path + "."))
        elif item is not None and item != []:
            out[path] = item
    return out


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _raised(old: Any, new: Any) -> bool:
    a, b = _num(old), _num(new)
    return (a is not None and b is not None and b > a) or (old is None and new is not None)


# What a transport does or does not offer, as the registry knows it, in a reviewer's words.
_TRANSPORT_FEATURES = (("token counting", "counts_tokens"), ("inference_geo", "inference_geo"))
# What every Claude transport offers the gateway's policies alike.
_ON_EVERY_TRANSPORT = "prompt caching (breakpoints in blocks), tool use, streaming"


def _transport_risk(old: Any, new: Any) -> str:
    """A move between transports: where the data goes, what replay keeps, what is lost."""
    before, after = old or FIRST_PARTY, new or FIRST_PARTY
    had, has = capabilities(before), capabilities(after)
    lost = [name for name, fact in _TRANSPORT_FEATURES if getattr(had, fact) > getattr(has, fact)]
    gained = [name for name, fact in _TRANSPORT_FEATURES if getattr(has, fact) > getattr(had, fact)]
    kept = [name for name, fact in _TRANSPORT_FEATURES if getattr(had, fact) and getattr(has, fact)]
    version = has.body_version or "the catalog's, as the anthropic-version header"
    return (
        f"transport moved from {before} to {after}: the requests (and the bank's data) go "
        f"there instead; answers recorded on {before} are not replayed (the request key holds "
        f"the transport and region); lost: {', '.join(lost) or 'nothing'}; gained: "
        f"{', '.join(gained) or 'nothing'}; kept: {', '.join([*kept, _ON_EVERY_TRANSPORT])}; "
        f"API version: {version}"
    )


def _risk(key: str, old: Any, new: Any) -> str | None:
    if key == "transport":
        return _transport_risk(old, new)
    if key == "region":
        return (
            f"region changed from {old or 'none'} to {new or 'none'}: where the bank's data is "
            "processed changes; recorded replays no longer match (the key holds the region)"
        )
    if key == "transport_id":
        return (
            "the model's id on the transport changed: a cross-region inference profile "
            "(global., us., eu., ...) decides where inference may run; recorded replays no "
            "longer match"
        )
    if key == "model_id":
        return "model changed: answers, cost and limits change; recorded replays no longer match"
    if key == "cache_mode":
        if old == "replay":
            return (
                "replay turned off: identical requests call the model again (reproducibility, cost)"
            )
        return "replay turned on: identical requests get the recorded answer"
    if key == "reproducible" and old is True:
        return "no longer marked reproducible"
    if key in ("generation.temperature", "generation.top_p", "generation.top_k"):
        if _raised(old, new) or new is None:
            return f"{key.split('.')[1]} raised or removed: answers vary more (reproducibility)"
        return "sampling changed: new request hash, recorded replays no longer match"
    if key == "generation.max_tokens" and _raised(old, new):
        return "max_tokens raised: longer, costlier answers allowed"
    if key == "generation.effort" or key.startswith("generation.thinking"):
        return "reasoning changed: cost and latency change; recorded replays no longer match"
    if key == "system_prompt_digest":
        return "system prompt changed: behaviour changes; recorded replays no longer match"
    if key == "output_schema_digest" or key == "output_format":
        return "output contract changed: downstream parsers must be checked"
    if key.startswith("caller."):
        return _caller_risk(key, old, new)
    return None


# Whose system prompt is sent, from the policy's alone to the caller's alone.
_SYSTEM_MODES = ("policy", "append", "own")


def _caller_risk(key: str, old: Any, new: Any) -> str | None:
    """A change of the caller contract that gives callers more freedom, said as such."""
    if key == "caller.system.mode" and new in _SYSTEM_MODES:
        before = _SYSTEM_MODES.index(old) if old in _SYSTEM_MODES else 0
        if _SYSTEM_MODES.index(new) > before:
            return "callers' own system prompt gains weight over the policy's"
        return None
    if key.endswith(".deny"):
        lifted = set(old or ()) - set(new or ())
        return f"callers get more freedom: {sorted(lifted)} no longer denied" if lifted else None
    if key == "caller.output.json_schema" and old is True and new is not True:
        return "callers' answers are no longer checked against their schema"
    if isinstance(new, list):
        added = set(new) - set(old or ())
        return f"callers get more freedom: {sorted(added)} allowed" if added else None
    if key == "caller.max_tokens.over" and new == "cap":
        return "a max_tokens above the range is lowered to it instead of refused"
    if new is not None and (old is None or _raised(old, new)):
        return "callers get more freedom"
    return None
