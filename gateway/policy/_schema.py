"""Policy schema v1: one shape, the TOML file's tables plus what the loader resolves.

    policy = Policy.from_content(recorded_content)     # exactly the policy that was recorded
    policy.fingerprint                                 # "sha256:<hex>"
    policy.model.id, policy.output.format, policy.prompt.system

A policy file validates into :class:`Policy` (strict, frozen, unknown keys are errors); the
loader then adds the system prompt text, the JSON schema and the tool definitions the file
names (fields marked ``In(loaded=True)``, which no file may set). Whether the model can honour
the values is the review rules' question, asked of this same object.

The fingerprint covers :meth:`Policy.content`, whose layout the fields' ``In`` markers give
(``gateway.policy._content_form``): file names are left out, resolved contents are in, so it
changes when behaviour changes and not when a comment, a key order or a file name does.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from audit.canonical import canonical_digest
from gateway.policy import _content_form
from gateway.policy._content_form import In
from gateway.policy._coverage import CALLER_PARTS
from gateway.policy._retention import RetentionTable

Effort = Literal["low", "medium", "high", "xhigh", "max"]
ThinkingType = Literal["enabled", "adaptive", "disabled", "between_tools"]
ThinkingDisplay = Literal["summarized", "omitted"]
# Where the provider may run inference (the Messages API's ``inference_geo``).
InferenceGeo = Literal["us", "global"]
# Which Claude transport a task's requests go over (docs/transports.md); unset: Anthropic's API.
Transport = Literal["anthropic", "bedrock", "vertex"]
OutputFormat = Literal["text", "json"]
# Whether a task's answers may be streamed (Gateway.stream), must be, or never are.
StreamMode = Literal["may", "must", "never"]
CacheMode = Literal["replay", "record"]
# Who shares a task's recorded answers: one caller only (an information barrier) or the task.
CacheScope = Literal["caller", "task"]

# How long the provider keeps a cached prompt prefix (prompt caching's ``ttl``).
CacheTTL = Literal["5m", "1h"]

# The caller contract: what a max_tokens above the caller's range meets; whose system prompt
# is sent; whether a caller with its own tools chooses tool_choice ("free") or not ("auto").
OverMax = Literal["refuse", "cap"]
SystemMode = Literal["policy", "append", "own"]
ToolChoiceMode = Literal["free", "auto"]

# Sign-off: how much harm a wrong answer of the task can do (the firm's model-risk tier).
RiskTier = Literal["low", "medium", "high"]

# TOML arrays arrive as lists; a frozen model stores them as tuples (elements stay strict).
StrTuple = Annotated[tuple[str, ...], Field(strict=False)]

# Left out of the content while unset, so a policy that does not use the field keeps the
# fingerprint it had before the field existed.
UNSET = In(omitted=None)

# Strict: TOML has real types, so "0.5" (a string) is an error, not a number. Ints are still
# accepted where a float is expected (temperature = 0 is fine).
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


class Thinking(BaseModel):
    model_config = _STRICT

    type: ThinkingType
    budget_tokens: int | None = None
    # Whether the answer returns the reasoning (summarised) or only its signature (omitted:
    # billed, not readable, so not auditable). None: the model's default.
    display: Annotated[ThinkingDisplay | None, UNSET] = None


class Generation(BaseModel):
    """The mandated generation parameters; None means "not set, the model's default"."""

    model_config = _STRICT

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: StrTuple = ()
    thinking: Thinking | None = None
    effort: Effort | None = None


class CallerRange(BaseModel):
    """A numeric range a caller may choose from, both ends inclusive."""

    model_config = _STRICT

    min: float | None = None
    max: float | None = None


class TokenRange(CallerRange):
    """The caller's ``max_tokens`` range, and what a larger value meets: a 400 ("refuse"),
    or the range's maximum ("cap": the value sent is recorded, the answer says it was capped)."""

    over: Annotated[OverMax | None, UNSET] = None

    @property
    def caps(self) -> bool:
        return self.over == "cap"


class CallerChoice(BaseModel):
    model_config = _STRICT

    allowed: StrTuple


class CallerThinking(BaseModel):
    """The ``thinking`` a caller may send: its types, and the largest ``budget_tokens``."""

    model_config = _STRICT

    allowed: tuple[ThinkingType, ...] = Field(strict=False)
    max_budget_tokens: int | None = Field(default=None, gt=0)


class CallerSystem(BaseModel):
    """Whose system prompt is sent: the policy's only, the policy's then the caller's, or the
    caller's own (the policy's when the caller sends none); ``max_bytes`` bounds the caller's."""

    model_config = _STRICT

    mode: SystemMode
    max_bytes: int | None = Field(default=None, gt=0)


class CallerTools(BaseModel):
    """The caller's own tools: names by fnmatch pattern (``deny`` wins), how many and how
    large, which provider-run (server) tool types, and whether it may choose ``tool_choice``."""

    model_config = _STRICT

    allow: StrTuple
    deny: StrTuple = ()
    max_count: int | None = Field(default=None, gt=0)
    max_bytes: int | None = Field(default=None, gt=0)
    server: StrTuple = ()
    choice: ToolChoiceMode = "free"


class CallerOutput(BaseModel):
    """The caller's own structured output (``output_config.format`` with a JSON schema),
    checked against the answer as the policy's own schema would be."""

    model_config = _STRICT

    json_schema: bool = False
    max_bytes: int | None = Field(default=None, gt=0)


class CallerStops(BaseModel):
    """Stop sequences a caller may add after the policy's own."""

    model_config = _STRICT

    max_count: int = Field(gt=0)
    max_length: int = Field(gt=0)


class Caller(BaseModel):
    """What a caller may set per request. Nothing by default: the policy wins.

    The first five are generation values within a range or from a list; the rest (each left
    out of the content while unset) open a part of the request the caller brings: its own
    system prompt, tools, output schema, thinking, stop sequences, metadata, context
    management and ``anthropic-beta`` values.
    """

    model_config = _STRICT

    max_tokens: TokenRange | None = None
    temperature: CallerRange | None = None
    top_p: CallerRange | None = None
    top_k: CallerRange | None = None
    effort: CallerChoice | None = None
    # Forward a stable, non-reversible caller identifier as ``metadata.user_id`` (an HMAC of
    # the caller name under the deployment's GATEWAY_USER_ID_SALT), never the name itself.
    # None (unset) is "no", and is left out of the fingerprint.
    forward_user_id: Annotated[bool | None, UNSET] = None
    thinking: Annotated[CallerThinking | None, UNSET] = None
    system: Annotated[CallerSystem | None, UNSET] = None
    tools: Annotated[CallerTools | None, UNSET] = None
    output: Annotated[CallerOutput | None, UNSET] = None
    stop_sequences: Annotated[CallerStops | None, UNSET] = None
    metadata: Annotated[CallerChoice | None, UNSET] = None
    context_management: Annotated[CallerChoice | None, UNSET] = None
    betas: Annotated[CallerChoice | None, UNSET] = None

    def opened(self) -> dict[str, CallerRange | CallerChoice]:
        """The generation values a caller may choose (a range or a list each)."""
        return {
            key: value
            for key in ("max_tokens", "temperature", "top_p", "top_k", "effort")
            if (value := getattr(self, key)) is not None
        }

    def parts(self) -> dict[str, BaseModel]:
        """The opened parts of the request a caller brings (see the class), by key."""
        return {
            key: value
            for key in CALLER_PARTS
            if (value := getattr(self, key)) is not None
            and not (key == "system" and value.mode == "policy")
        }

    @property
    def is_open(self) -> bool:
        """Whether the caller may bring a part of the request (an opened contract)."""
        return bool(self.parts())


class ModelTable(BaseModel):
    model_config = _STRICT

    id: Annotated[str, In("model_id")]
    # Where inference must run; sent as ``inference_geo`` and checked against the answer's
    # ``usage.inference_geo``. None: wherever the workspace's default sends it.
    inference_geo: Annotated[InferenceGeo | None, UNSET] = None
    # The transport the model is reached over, and there the model's id (a Bedrock
    # cross-region inference profile such as "eu.anthropic.claude-sonnet-4-6"; None: the
    # catalog's base id for the transport) and the cloud region the requests must go to.
    transport: Annotated[Transport | None, UNSET] = None
    transport_id: Annotated[str | None, UNSET] = None
    region: Annotated[str | None, UNSET] = None
    # Other models a caller may choose by naming one as the request's model (each reviewed
    # as the pinned one is); any other request is answered by ``id``.
    choices: Annotated[
        tuple[str, ...] | None, Field(strict=False), In("model_choices", omitted=None)
    ] = None

    @property
    def allowed(self) -> tuple[str, ...]:
        """The models that may answer: the pinned one first, then the choices."""
        return (self.id, *(self.choices or ()))


class PromptTable(BaseModel):
    model_config = _STRICT

    system_file: Annotated[str | None, In(left_out=True)] = None
    cache: Annotated[CacheTTL | None, In("prompt_cache", omitted=None)] = None
    # The text of system_file, as sent.
    system: Annotated[str | None, In("system_prompt", loaded=True)] = None


class ToolsTable(BaseModel):
    """Tools the model may call: their definitions in a reviewed JSON file, as sent."""

    model_config = _STRICT

    file: Annotated[str | None, In(left_out=True)] = None
    # "auto", "any", "none", or the name of one declared tool (forced); None: "auto". A loaded
    # policy names it exactly when it has tools (see ``with_choice_settled``).
    choice: Annotated[str | None, In("tool_choice", omitted=None)] = None
    # Server tools (run by the provider) allowed by exact type and version.
    server: Annotated[StrTuple, In("server_tools", omitted=())] = ()
    # The definitions of ``file``, as sent; None for a policy without tools.
    definitions: Annotated[list[dict[str, Any]] | None, In("tools", omitted=None, loaded=True)] = (
        None
    )

    @property
    def chosen(self) -> str:
        return self.choice or "auto"

    def with_choice_settled(self) -> ToolsTable:
        """The choice a loaded policy records: named with tools (default "auto"), else None."""
        choice = self.chosen if self.definitions is not None else None
        return self.model_copy(update={"choice": choice})


class AttachmentLimits(BaseModel):
    """How many attachments of one kind a request may carry, and how large each may be."""

    model_config = _STRICT

    max_bytes: int = Field(gt=0)
    max_count: int = Field(gt=0)
    # URL sources are fetched by the provider at request time: what the model read is then
    # not in the request, and can change after the fact.
    url: bool = False


class InputTable(BaseModel):
    """What a caller's messages may carry besides text. Nothing by default."""

    model_config = _STRICT

    images: AttachmentLimits | None = None
    documents: AttachmentLimits | None = None
    # Whether a caller may mark its own blocks with cache_control (prompt caching).
    cache_control: bool = False


class OutputTable(BaseModel):
    model_config = _STRICT

    format: Annotated[OutputFormat, In("output_format")] = "text"
    schema_file: Annotated[str | None, In(left_out=True)] = None
    stream: Annotated[StreamMode, In(omitted="may")] = "may"
    # The JSON schema of schema_file.
    json_schema: Annotated[dict[str, Any] | None, In("output_schema", loaded=True)] = None
    # A text answer's categorical part: a regular expression whose one group is the verdict
    # (say '<verdict>\s*(PASS|ESCALATE|BLOCK)\s*</verdict>'). Migration reports tabulate
    # how verdicts flip; a JSON answer's verdict is its schema's enum property instead.
    verdict: Annotated[str | None, In("output_verdict", omitted=None)] = None

    @property
    def has_schema(self) -> bool:
        """Whether a schema is named (a file's) or held (a recorded policy's)."""
        return self.schema_file is not None or self.json_schema is not None


class CacheTable(BaseModel):
    model_config = _STRICT

    mode: Annotated[CacheMode, In("cache_mode")] = "record"
    # Content recorded before scopes existed has no scope: it shared answers task-wide.
    scope: Annotated[CacheScope, In("cache_scope", omitted="task")] = "caller"


class Derivation(BaseModel):
    """Marks a policy derived from a reviewed one (an experiment, offline mode): what it is
    called in the log, and the reviewed policy it came from. A derived policy never shares the
    reviewed task's replay cache: its label is part of every request key."""

    model_config = _STRICT

    label: str
    reviewed_fingerprint: str


class Policy(BaseModel):
    """One task's policy: the file as written, plus (once loaded) the prompt, schema and tools
    it names. Build it with PolicySet or from_content."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    schema_version: Literal[1] = Field(alias="schema")
    # The file's stem; a file that names its task must name it so.
    task: str = ""
    description: str
    owner: str
    # Sign-off facts for compliance (shown in review and show; fingerprinted when set).
    risk_tier: Annotated[RiskTier | None, UNSET] = None
    effective_date: Annotated[date | None, UNSET] = None  # a TOML date: 2027-01-01
    regulations: Annotated[StrTuple, In(omitted=())] = ()  # e.g. ["MiFID II Art. 16"]
    reproducible: bool = False
    model: Annotated[ModelTable, In(flatten=True)]
    generation: Generation = Generation()
    prompt: Annotated[PromptTable, In(flatten=True)] = PromptTable()
    tools: Annotated[ToolsTable, In(flatten=True)] = ToolsTable()
    input: Annotated[InputTable, In(omitted=InputTable())] = InputTable()
    output: Annotated[OutputTable, In(flatten=True)] = OutputTable()
    cache: Annotated[CacheTable, In(flatten=True)] = CacheTable()
    caller: Caller = Caller()
    # Left out at its default (kept forever), so every earlier fingerprint stands.
    retention: Annotated[RetentionTable, In(omitted=RetentionTable())] = RetentionTable()
    derived: Annotated[Derivation | None, In(omitted=None, loaded=True)] = None
    # Where it was loaded from: for messages only, never part of content or fingerprint.
    source: Annotated[str | None, In(left_out=True, loaded=True)] = Field(
        default=None, exclude=True
    )

    def content(self) -> dict[str, Any]:
        """The policy as JSON-safe data, prompt and schema inlined: what the fingerprint covers."""
        return _content_form.to_content(self)

    def derive(self, label: str, **update: Any) -> Policy:
        """A derived policy (see :class:`Derivation`) with ``update`` applied."""
        reviewed = self.derived.reviewed_fingerprint if self.derived else self.fingerprint
        derivation = Derivation(label=label, reviewed_fingerprint=reviewed)
        return self.model_copy(update={**update, "derived": derivation})

    def on_model(self, model_id: str) -> Policy:
        """This policy with another pinned model (a migration's or an experiment's), and no
        other model a caller could choose instead."""
        moved = self.model.model_copy(update={"id": model_id, "choices": None})
        return self.model_copy(update={"model": moved})

    @cached_property
    def fingerprint(self) -> str:  # cached: the model is frozen, and every record needs it
        return canonical_digest(self.content())

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Policy:
        """A changed copy (offline mode, experiments, migrations derive policies this way).

        The cached fingerprint must not travel with it: a derived policy is a different policy.
        """
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("fingerprint", None)
        return copy

    @classmethod
    def from_content(cls, content: dict[str, Any]) -> Policy:
        """Rebuild a policy from a recorded ``content()`` dict (JSON gives lists, not tuples)."""
        return cls.model_validate(_content_form.from_content(cls, content), strict=False)
