"""The policy engine: load and review policy files, plan the exact request a task may send.

from gateway.policy import PolicySet, plan_request
policies = PolicySet.load(Path("policies"), catalog)
policy = policies.get("compliance_review")
plan = plan_request(policy, catalog.get(policy.model.id), messages)
"""

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
from gateway.policy._model_choice import chosen_model, transported
from gateway.policy._plan import Plan, plan_request
from gateway.policy._policy_set import PolicyEntry, PolicySet
from gateway.policy._requested import IN_BODY, recorded_overrides, requested_keys
from gateway.policy._retention import Minimum, RetentionTable, minimum_days
from gateway.policy._review import ReviewReport, review_policies
from gateway.policy._routes import ANY, ROUTES_FILE, ROUTES_TASK, Route, RouteTable
from gateway.policy._schema import Caller, CallerChoice, CallerRange, Generation, Policy, Thinking
from gateway.policy._target import TARGET_SYNTAX, ModelTarget, parse_model_target

__all__ = [
    "ANY",
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
    "minimum_days",
    "opened_keys",
    "parse_model_target",
    "plan_request",
    "recorded_overrides",
    "requested_keys",
    "review_policies",
    "transported",
]
