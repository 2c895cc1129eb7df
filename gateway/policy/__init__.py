"""The policy engine: load and review policy files, plan the exact request a task may send.

from gateway.policy import PolicySet, plan_request
policies = PolicySet.load(Path("policies"), catalog)
policy = policies.get("compliance_review")
plan = plan_request(policy, catalog.get(policy.model.id), messages)

Each name loads on first use (as ``gateway.evidence`` does), so that a command that needs one
part (the task names, a recorded contract) does not import policy loading, jsonschema and
the review rules.
"""

import typing as _typing

from audit.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from gateway.policy._contract_text import broad_grant, caller_grants, contract_kind
    from gateway.policy._coverage import caller_parts, contract_of, opened_keys
    from gateway.policy._diff import FieldChange, TaskDiff, diff_policies, diff_policy_sets
    from gateway.policy._field_table import (
        FIELDS,
        PLACEHOLDER_INPUT,
        PolicyField,
        Shown,
        field_rows,
    )
    from gateway.policy._findings import Finding, Severity
    from gateway.policy._folder import ROUTES_FILE, ROUTES_TASK, task_names
    from gateway.policy._model_choice import chosen_model, transported
    from gateway.policy._plan import Plan, plan_request, planning_day
    from gateway.policy._policy_set import PolicyEntry, PolicySet
    from gateway.policy._requested import CONTENT_OVERRIDES, IN_BODY, in_body_overrides
    from gateway.policy._retention import Minimum, RetentionTable, minimum_days
    from gateway.policy._review import ReviewReport, review_policies
    from gateway.policy._routes import ANY, Route, RouteTable
    from gateway.policy._schema import (
        Caller,
        CallerChoice,
        CallerRange,
        Generation,
        Policy,
        Thinking,
    )
    from gateway.policy._target import TARGET_SYNTAX, ModelTarget, parse_model_target

# Where each name that loads on first use lives.
_LAZY = {
    "broad_grant": "gateway.policy._contract_text",
    "caller_grants": "gateway.policy._contract_text",
    "contract_kind": "gateway.policy._contract_text",
    "caller_parts": "gateway.policy._coverage",
    "contract_of": "gateway.policy._coverage",
    "opened_keys": "gateway.policy._coverage",
    "FieldChange": "gateway.policy._diff",
    "TaskDiff": "gateway.policy._diff",
    "diff_policies": "gateway.policy._diff",
    "diff_policy_sets": "gateway.policy._diff",
    "FIELDS": "gateway.policy._field_table",
    "PLACEHOLDER_INPUT": "gateway.policy._field_table",
    "PolicyField": "gateway.policy._field_table",
    "Shown": "gateway.policy._field_table",
    "field_rows": "gateway.policy._field_table",
    "Finding": "gateway.policy._findings",
    "Severity": "gateway.policy._findings",
    "chosen_model": "gateway.policy._model_choice",
    "transported": "gateway.policy._model_choice",
    "Plan": "gateway.policy._plan",
    "plan_request": "gateway.policy._plan",
    "planning_day": "gateway.policy._plan",
    "CONTENT_OVERRIDES": "gateway.policy._requested",
    "IN_BODY": "gateway.policy._requested",
    "in_body_overrides": "gateway.policy._requested",
    "PolicyEntry": "gateway.policy._policy_set",
    "PolicySet": "gateway.policy._policy_set",
    "Minimum": "gateway.policy._retention",
    "RetentionTable": "gateway.policy._retention",
    "minimum_days": "gateway.policy._retention",
    "ReviewReport": "gateway.policy._review",
    "review_policies": "gateway.policy._review",
    "ANY": "gateway.policy._routes",
    "ROUTES_FILE": "gateway.policy._folder",
    "ROUTES_TASK": "gateway.policy._folder",
    "task_names": "gateway.policy._folder",
    "Route": "gateway.policy._routes",
    "RouteTable": "gateway.policy._routes",
    "Caller": "gateway.policy._schema",
    "CallerChoice": "gateway.policy._schema",
    "CallerRange": "gateway.policy._schema",
    "Generation": "gateway.policy._schema",
    "Policy": "gateway.policy._schema",
    "Thinking": "gateway.policy._schema",
    "TARGET_SYNTAX": "gateway.policy._target",
    "ModelTarget": "gateway.policy._target",
    "parse_model_target": "gateway.policy._target",
}

__all__ = [
    "ANY",
    "CONTENT_OVERRIDES",
    "FIELDS",
    "IN_BODY",
    "PLACEHOLDER_INPUT",
    "ROUTES_FILE",
    "ROUTES_TASK",
    "TARGET_SYNTAX",
    "Caller",
    "CallerChoice",
    "CallerRange",
    "FieldChange",
    "Finding",
    "Generation",
    "Minimum",
    "ModelTarget",
    "Plan",
    "Policy",
    "PolicyEntry",
    "PolicyField",
    "PolicySet",
    "RetentionTable",
    "ReviewReport",
    "Route",
    "RouteTable",
    "Severity",
    "Shown",
    "TaskDiff",
    "Thinking",
    "broad_grant",
    "caller_grants",
    "caller_parts",
    "chosen_model",
    "contract_kind",
    "contract_of",
    "diff_policies",
    "diff_policy_sets",
    "field_rows",
    "in_body_overrides",
    "minimum_days",
    "opened_keys",
    "parse_model_target",
    "plan_request",
    "planning_day",
    "review_policies",
    "task_names",
    "transported",
]


__getattr__ = _lazy_names(__name__, _LAZY)
