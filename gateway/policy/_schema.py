"""Policy schema v1: the TOML file as written (``PolicyFile``) and the loaded ``Policy``.

    policy = Policy.from_content(recorded_content)     # exactly the policy that was recorded
    policy.fingerprint                                 # "sha256:<hex>"

``PolicyFile`` mirrors the TOML tables and rejects unknown keys; it says nothing about whether
the model can honour the values (the review rules do). ``Policy`` is the reviewed result, flat,
with the system prompt and JSON schema inlined, so its fingerprint covers everything that
changes behaviour and nothing that does not (comments, whitespace, key order, file names).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from audit.canonical import canonical_digest

Effort = Literal["low", "medium", "high", "xhigh", "max"]
ThinkingType = Literal["enabled", "adaptive", "disabled", "between_tools"]
ThinkingDisplay = Literal["summarized", "omitted"]
# Where the provider may run inference (the Messages API's ``inference_geo``).
InferenceGeo = Literal["us", "global"]
OutputFormat = Literal["text", "json"]
# Whether a task's answers may be streamed (Gateway.stream), must be, or never are.
StreamMode = Literal["may", "must", "never"]
CacheMode = Literal["replay", "record"]
# Who shares a task's recorded answers: one caller only (an information barrier) or the task.
CacheScope = Literal["caller", "task"]

# How long the provider keeps a cached prompt prefix (prompt caching's ``ttl``).
CacheTTL = Literal["5m", "1h"]

# Sign-off: how much harm a wrong answer of the task can do (the firm's model-risk tier).
RiskTier = Literal["low", "medium", "high"]
SIGNOFF_KEYS = ("risk_tier", "effective_date", "regulations")

# TOML arrays arrive as lists; a frozen model stores them as tuples (elements stay strict).
StrTuple = Annotated[tuple[str, ...], Field(strict=False)]

# Strict: TOML has real types, so "0.5" (a string) is an error, not a number. Ints are still
# accepted where a float is expected (temperature = 0 is fine).
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


class Thinking(BaseModel):
    model_config = _STRICT

    type: ThinkingType
    budget_tokens: int | None = None
    # Whether the answer returns the reasoning (summarised) or only its signature (omitted:
    # billed, not readable, so not auditable). None: the model's default.
    display: ThinkingDisplay | None = None


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


class CallerChoice(BaseModel):
    model_config = _STRICT

    allowed: StrTuple


class Caller(BaseModel):
    """What a caller may set per request. Nothing by default: the policy wins."""

    model_config = _STRICT

    max_tokens: CallerRange | None = None
    temperature: CallerRange | None = None
    top_p: CallerRange | None = None
    top_k: CallerRange | None = None
    effort: CallerChoice | None = None
    # Forward a stable, non-reversible caller identifier as ``metadata.user_id`` (an HMAC of
    # the caller name under the deployment's GATEWAY_USER_ID_SALT), never the name itself.
    # None (unset) is "no", and is left out of the fingerprint.
    forward_user_id: bool | None = None

    def opened(self) -> dict[str, CallerRange | CallerChoice]:
        return {
            key: value
            for key in ("max_tokens", "temperature", "top_p", "top_k", "effort")
            if (value := getattr(self, key)) is not None
        }


class ModelTable(BaseModel):
    model_config = _STRICT

    id: str
    inference_geo: InferenceGeo | None = None


class PromptTable(BaseModel):
    model_config = _STRICT

    system_file: str | None = None
    cache: CacheTTL | None = None


class ToolsTable(BaseModel):
    """Tools the model may call: their definitions in a reviewed JSON file, as sent."""

    model_config = _STRICT

    file: str | None = None
    # "auto", "any", "none", or the name of one declared tool (forced).
    choice: str = "auto"
    # Server tools (run by the provider) allowed by exact type and version.
    server: StrTuple = ()


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

    format: OutputFormat = "text"
    schema_file: str | None = None
    stream: StreamMode = "may"


class CacheTable(BaseModel):
    model_config = _STRICT

    mode: CacheMode = "record"
    scope: CacheScope = "caller"


class Derivation(BaseModel):
    """Marks a policy derived from a reviewed one (an experiment, offline mode): what it is
    called in the log, and the reviewed policy it came from. A derived policy never shares the
    reviewed task's replay cache: its label is part of every request key."""

    model_config = _STRICT

    label: str
    reviewed_fingerprint: str


class PolicyFile(BaseModel):
    """One policy file exactly as written (schema v1)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    schema_version: Literal[1] = Field(alias="schema")
    task: str | None = None
    description: str
    owner: str
    # Sign-off facts for compliance (shown in review and show; fingerprinted when set).
    risk_tier: RiskTier | None = None
    effective_date: date | None = None  # a TOML date: effective_date = 2027-01-01
    regulations: StrTuple = ()  # references, e.g. ["MiFID II Art. 16", "SR 11-7"]
    reproducible: bool = False
    model: ModelTable
    generation: Generation = Generation()
    prompt: PromptTable = PromptTable()
    tools: ToolsTable = ToolsTable()
    input: InputTable = InputTable()
    output: OutputTable = OutputTable()
    cache: CacheTable = CacheTable()
    caller: Caller = Caller()

    def signoff(self) -> dict[str, Any]:
        """The sign-off fields, as :class:`Policy` takes them."""
        return {key: getattr(self, key) for key in SIGNOFF_KEYS}


class Policy(BaseModel):
    """A reviewed policy, ready to plan requests. Build it with PolicySet or from_content."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_version: Literal[1] = 1
    task: str
    description: str
    owner: str
    risk_tier: RiskTier | None = None
    effective_date: date | None = None
    regulations: StrTuple = ()
    reproducible: bool
    model_id: str
    # Where inference must run; sent as ``inference_geo`` and checked against the answer's
    # ``usage.inference_geo``. None: wherever the workspace's default sends it.
    inference_geo: InferenceGeo | None = None
    generation: Generation
    system_prompt: str | None
    prompt_cache: CacheTTL | None = None
    # The tool definitions as sent (the tools file inlined), and the tool_choice keyword or
    # forced tool name; both None for a policy without tools.
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | None = None
    server_tools: StrTuple = ()
    input: InputTable = InputTable()
    output_format: OutputFormat
    output_schema: dict[str, Any] | None
    stream: StreamMode = "may"
    cache_mode: CacheMode
    # "task" is the default here only for policies recorded before scopes existed, which
    # shared answers across callers; a policy file's own default is "caller".
    cache_scope: CacheScope = "task"
    derived: Derivation | None = None
    caller: Caller
    # Where it was loaded from: for messages only, never part of content or fingerprint.
    source: str | None = Field(default=None, exclude=True)

    def content(self) -> dict[str, Any]:
        """The policy as JSON-safe data, prompt and schema inlined: what the fingerprint covers.

        A task-wide cache scope, the absence of a derivation and ``stream = "may"`` are left
        out, so a policy recorded before any of them existed keeps its fingerprint (and means
        the same).
        """
        content = self.model_dump(mode="json")
        # Sign-off fields only when set: a policy without them keeps its fingerprint.
        for key in SIGNOFF_KEYS:
            if content[key] in (None, []):
                del content[key]
        if content["stream"] == "may":
            del content["stream"]
        if content["cache_scope"] == "task":
            del content["cache_scope"]
        if content["derived"] is None:
            del content["derived"]
        # Settings a policy without tools, attachments or prompt caching leaves unset are left
        # out too, so such a policy keeps the fingerprint it had before they existed.
        for key in ("prompt_cache", "tools", "tool_choice", "inference_geo"):
            if content[key] is None:
                del content[key]
        thinking = content["generation"]["thinking"]
        if thinking is not None and thinking["display"] is None:
            del thinking["display"]
        if content["caller"]["forward_user_id"] is None:
            del content["caller"]["forward_user_id"]
        if not content["server_tools"]:
            del content["server_tools"]
        if content["input"] == InputTable().model_dump(mode="json"):
            del content["input"]
        return content

    def derive(self, label: str, **update: Any) -> Policy:
        """A derived policy (see :class:`Derivation`) with ``update`` applied."""
        reviewed = self.derived.reviewed_fingerprint if self.derived else self.fingerprint
        derivation = Derivation(label=label, reviewed_fingerprint=reviewed)
        return self.model_copy(update={**update, "derived": derivation})

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
        return cls.model_validate(content, strict=False)
