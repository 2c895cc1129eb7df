"""Which task a Messages request goes to, and the 404 of one that names none.

    chosen = choose_task(body, header_task=..., key=key, policies=policies)
    chosen.task       # what the gateway is asked to run (None: the body names nothing)
    chosen.overrides  # {"model": id} when the task's policy lets that model answer

In order: the ``x-gateway-task`` header; a ``model`` that names a task; the routing table's
most specific route naming the key's caller for that model (``routes.toml``); the key's
default task (``gateway keys create --task``); the most specific route for any caller (``*``,
the shipped catch-all among them). A ``model`` none of these answers goes to the gateway
as a task name, which refuses it (a REJECTED record) as an unknown task; :func:`unrouted`
turns that refusal into a 404 naming what this caller may ask for. A ``model`` only a
withheld (unapproved) routing table would route goes to the gateway as the task
``routes``, which refuses it as the table's PolicyNotApproved: its REJECTED record names the
table's version (fingerprint) and stores it, as a withheld task's does.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.callers import CallerKey
from gateway.errors import UnknownTask
from gateway.policy import ANY, ROUTES_TASK, PolicySet
from gateway.server._errors import ApiError

__all__ = ["TASK_HEADER", "ChosenTask", "choose_task", "unrouted"]

TASK_HEADER = "x-gateway-task"


@dataclass(frozen=True)
class ChosenTask:
    task: str | None
    # The real model id the request asked for, when it is not a task name.
    model: str | None = None
    # Nothing named a task: the model went to the gateway as a task name.
    unmatched: bool = False

    def overrides(self, policies: PolicySet) -> dict[str, str]:
        """The ``model`` override that makes the asked model answer, when the task's policy
        lists it among its ``[model] choices``; otherwise the task's pinned model answers."""
        if self.task == ROUTES_TASK and self.model is not None:
            return {"model": self.model}  # recorded with the table's refusal: what was asked
        entry = policies.entry(self.task) if self.task else None
        policy = entry.policy if entry is not None else None
        if self.model is None or policy is None or self.model not in policy.model.allowed[1:]:
            return {}
        return {"model": self.model}


def choose_task(
    body: object, *, header_task: str | None, key: CallerKey, policies: PolicySet
) -> ChosenTask:
    asked = body.get("model") if isinstance(body, dict) else None
    if header_task:  # the model may still be one of the task's choices
        return ChosenTask(header_task, model=asked if isinstance(asked, str) else None)
    if not isinstance(asked, str) or not asked:
        return ChosenTask(key.task)  # None: the body parser says what is missing
    if policies.entry(asked) is not None:
        return ChosenTask(asked)
    route = policies.routes.route(key.caller, asked) if policies.routes is not None else None
    # A route naming this caller is the most specific word on it; the key's own default task
    # is next, above the routes for any caller (the shipped table's catch-all among them).
    if route is not None and route.caller != ANY:
        return ChosenTask(route.task, model=asked)
    if key.task is not None:
        return ChosenTask(key.task, model=asked)
    if route is not None:
        return ChosenTask(route.task, model=asked)
    withheld = policies.withheld_routes if policies.routes_refused is not None else None
    if withheld is not None and withheld.route(key.caller, asked) is not None:
        return ChosenTask(ROUTES_TASK, model=asked)  # refused, naming the table's version
    return ChosenTask(asked, unmatched=True)


def unrouted(
    error: UnknownTask, chosen: ChosenTask, key: CallerKey, policies: PolicySet
) -> ApiError:
    """The 404 of a ``model`` that is no task and no route of this caller."""
    routes = policies.routes.routes_for(key.caller) if policies.routes is not None else []
    routed = [
        f"{'any current Claude model' if r.model == ANY else r.model} (task {r.task})"
        for r in routes
    ]
    tasks = ", ".join(p.task for p in policies.policies()) or "none"
    if policies.routes_refused is not None:  # the table lacks its approvals: no route answers
        message = f"{policies.routes_refused()} Name a task as the model or in the {TASK_HEADER} "
        return ApiError(403, "permission_error", message + f"header (tasks: {tasks}).",
                        request_id=error.request_id)  # fmt: skip
    message = (
        f"model {chosen.task!r} is neither a task nor a model id routed for caller "
        f"{key.caller!r}. This caller may ask for: "
        + ("; ".join(routed) if routed else "no routed model ids")
        + f". Or name a task as the model or in the {TASK_HEADER} header (tasks: {tasks})."
    )
    return ApiError(404, "not_found_error", message, request_id=error.request_id)
