"""Compare two policy folders task by task, with a risk note where a change matters.

    for change in diff_policy_sets(old_set, new_set):
        print(change.task, change.status, [c.key for c in change.changes])

Prompts and schemas are compared by digest: the diff shows that they changed, not their text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from audit.canonical import canonical_digest, digest
from gateway.policy._policy_set import PolicySet
from gateway.policy._schema import Policy

EFFORT_ORDER = ("low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class FieldChange:
    key: str
    old: Any
    new: Any
    risk: str | None


@dataclass(frozen=True)
class TaskDiff:
    task: str
    status: Literal["added", "removed", "changed", "unchanged", "not-loadable"]
    changes: tuple[FieldChange, ...] = ()
    old_fingerprint: str | None = None
    new_fingerprint: str | None = None


def diff_policy_sets(old: PolicySet, new: PolicySet) -> list[TaskDiff]:
    result: list[TaskDiff] = []
    for task in sorted(set(old.tasks()) | set(new.tasks())):
        before = _loaded(old, task)
        after = _loaded(new, task)
        if task not in new.tasks():
            result.append(TaskDiff(task, "removed", old_fingerprint=_fp(before)))
        elif task not in old.tasks():
            result.append(TaskDiff(task, "added", new_fingerprint=_fp(after)))
        elif before is None or after is None:
            result.append(TaskDiff(task, "not-loadable", (), _fp(before), _fp(after)))
        else:
            changes = _changes(before, after)
            status: Literal["changed", "unchanged"] = "changed" if changes else "unchanged"
            result.append(TaskDiff(task, status, changes, before.fingerprint, after.fingerprint))
    return result


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


def _risk(key: str, old: Any, new: Any) -> str | None:
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
    if key.startswith("caller.") and (new is not None and (old is None or _raised(old, new))):
        return "callers get more freedom"
    return None
