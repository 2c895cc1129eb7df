"""The gateway's one error tree.

Every error says what happened and what to do next, in words a compliance officer can read.
A front end shows ``str(error)`` as one line; which exit code or status an error means is the
front end's own table (the CLI's is ``gateway/cli/_boundary.py``), not an attribute here.

    GatewayError
    ├── ConfigurationError        settings missing or unusable (no API key, bad durability, ...)
    ├── PolicyError
    │   ├── PolicyLoadError       a policy folder or file does not load (carries the findings)
    │   ├── PolicyNotApproved     (a PolicyLoadError) a version lacking its approvals
    │   ├── UnknownTask           no policy for the task name (lists the known ones)
    │   └── PolicyViolation       a caller asked for something the policy does not allow
    ├── InputError                the prompt or messages are unusable (empty, wrong type, too big)
    ├── AuditError
    │   ├── AuditUnavailable      the audit database cannot be opened or its schema is behind
    │   └── AuditWriteError       an audit record could not be committed or used (fail closed)
    │       └── IntegrityAlert    a recorded event did not check out, so it was not used
    ├── UpstreamError             the model provider failed (carries status, type, request ids)
    │   ├── UpstreamRejected      a non-retryable answer (400, 401, 403, 404, 413, ...)
    │   └── UpstreamUnavailable   retryable failures until the retry budget ran out
    └── OutputValidationError     the model's JSON did not parse or match the policy schema

    AnswerAlertWarning            (a UserWarning, not an error) an answer was returned, but
                                  differs from what its policy pinned (another model, ...)
"""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    """Base of every error the gateway raises on purpose. ``request_id``: the audit log's
    id of the request this error ended, when the request was recorded (a refusal is recorded
    REJECTED, a failed call FAILED); None when nothing was recorded."""

    request_id: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message} {self.hint}" if self.hint else self.message


class ConfigurationError(GatewayError):
    pass


class PolicyError(GatewayError):
    pass


class PolicyLoadError(PolicyError):
    """A policy does not load; ``findings`` holds every problem found, not just the first."""

    def __init__(self, message: str, *, findings: tuple[Any, ...] = (), hint: str | None = None):
        self.findings = findings
        super().__init__(message, hint=hint)


class PolicyNotApproved(PolicyLoadError):
    """A task (or the routing table, ``task`` "routes") whose exact version lacks the approvals
    ``GATEWAY_REQUIRE_APPROVALS`` asks for: refused, while the approved tasks serve."""

    def __init__(
        self,
        task: str,
        fingerprint: str,
        *,
        approvers: tuple[str, ...],
        required: int,
        not_counted: tuple[str, ...] = (),
        content: dict[str, Any] | None = None,
    ) -> None:
        self.task = task
        self.fingerprint = fingerprint
        # The refused version's content, stored with the refusal's record when no policy is
        # (the routing table's: its REJECTED record names the version, as a task's does).
        self.content = content
        self.approvers = approvers
        self.required = required
        self.missing = max(required - len(approvers), 0)
        what = "the routing table (routes.toml)" if task == "routes" else f"task {task!r}"
        by = f"approved by {', '.join(approvers)}" if approvers else "approved by nobody"
        super().__init__(
            f"{what} is refused: its version {fingerprint} has {len(approvers)} of the "
            f"{required} approvals by distinct approvers that GATEWAY_REQUIRE_APPROVALS asks "
            f"for ({by}; {self.missing} more needed)"
            + (f"; not counted: {'; '.join(not_counted)}" if not_counted else "")
            + ".",
            hint=f"Have approvers sign this version: 'gateway policy approve {task} "
            "--approver NAME' (each with their own GATEWAY_APPROVER_KEY); the other tasks serve.",
        )


class UnknownTask(PolicyError):
    def __init__(self, task: str, known: list[str]) -> None:
        self.task = task
        self.known = sorted(known)
        listing = ", ".join(self.known) or "none"
        if not isinstance(task, str):  # a caller passed a list or a number, not a name
            super().__init__(
                "the task must be a policy's name (a string), not a value of type "
                f"{type(task).__name__}.",
                hint=f"Known tasks: {listing}.",
            )
            return
        super().__init__(
            f"unknown task {task!r}.",
            hint=f"Known tasks: {listing}. Add a policy file named {task}.toml to add one.",
        )


class PolicyViolation(PolicyError):
    """A caller override the policy's ``[caller]`` table does not allow."""

    def __init__(self, message: str, *, key: str, request_id: str | None = None) -> None:
        self.key = key
        self.request_id = request_id
        super().__init__(message)


class InputError(GatewayError):
    pass


class ErasureRefused(PolicyError):
    """An erasure the record forbids: content under a legal hold, or under a regulatory
    minimum period that has not run out. Nothing was erased."""


class AuditError(GatewayError):
    pass


class AuditUnavailable(AuditError):
    pass


class AuditWriteError(AuditError):
    """An audit record could not be committed; the gateway failed closed."""

    def __init__(self, message: str, *, request_id: str | None = None, hint: str | None = None):
        self.request_id = request_id
        super().__init__(message, hint=hint)


class IntegrityAlert(AuditWriteError):
    """A recorded event the gateway was about to use did not check out (hash, link, columns,
    signature, preceding REQUEST or payload). It was not used; an INTEGRITY_ALERT event
    records what failed. ``problems`` holds one line per failed check."""

    def __init__(
        self, message: str, *, problems: tuple[str, ...] = (), request_id: str | None = None
    ) -> None:
        self.problems = problems
        super().__init__(
            message,
            request_id=request_id,
            hint="Run 'gateway audit verify' and restore the audit database from a trusted "
            "copy; until then this request is not answered from the log.",
        )


class UpstreamError(GatewayError):
    def __init__(
        self,
        message: str,
        *,
        request_id: str | None = None,
        upstream_request_id: str | None = None,
        status: int | None = None,
        error_type: str | None = None,
        attempts: int = 0,
        hint: str | None = None,
    ) -> None:
        self.request_id = request_id
        self.upstream_request_id = upstream_request_id
        self.status = status
        self.error_type = error_type
        self.attempts = attempts
        super().__init__(message, hint=hint)


class UpstreamRejected(UpstreamError):
    pass


class UpstreamUnavailable(UpstreamError):
    pass


class OutputValidationError(GatewayError):
    """The model's output failed the policy's JSON check. The output is recorded, flagged."""

    def __init__(self, message: str, *, request_id: str | None = None, seq: int | None = None):
        self.request_id = request_id
        self.seq = seq
        super().__init__(message)


class AnswerAlertWarning(UserWarning):
    """An answer was recorded and returned, but what it reports about itself differs from what
    its policy pinned (the model that answered, where inference ran, a server-side context
    edit): each difference is an ANSWER_ALERT event. A warning, not an error, because the
    answer is on the record and the caller decides; ``warnings.simplefilter("error",
    AnswerAlertWarning)`` makes it one. ``checks`` names what differed (``"model"``, ...)."""

    def __init__(self, message: str, *, request_id: str, seq: int, checks: tuple[str, ...]):
        self.request_id = request_id
        self.seq = seq
        self.checks = checks
        super().__init__(message)
