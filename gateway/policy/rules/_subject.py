"""What a review rule looks at: one policy's settings next to its model's capabilities.

subject = Subject.of_policy(policy, catalog.get(policy.model_id), today=date.today())
findings = [f for rule in RULES for f in rule(subject)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from gateway.catalog import ModelInfo
from gateway.policy._findings import Finding
from gateway.policy._schema import Caller, Generation, Policy, PolicyFile


@dataclass(frozen=True)
class Subject:
    file: str
    model_id: str
    model: ModelInfo | None
    generation: Generation
    reproducible: bool
    output_format: str
    has_schema: bool
    stream: str
    cache_mode: str
    cache_scope: str
    caller: Caller
    today: date
    # The tool definitions (None: no tools), the tool choice and the allowed server tools.
    tools: tuple[dict[str, Any], ...] | None = None
    tool_choice: str = "auto"
    server_tools: tuple[str, ...] = ()

    @classmethod
    def of_file(
        cls,
        file: str,
        data: PolicyFile,
        model: ModelInfo | None,
        *,
        today: date,
        tools: list[dict[str, Any]] | None = None,
    ) -> Subject:
        return cls(
            file=file,
            model_id=data.model.id,
            model=model,
            generation=data.generation,
            reproducible=data.reproducible,
            output_format=data.output.format,
            has_schema=data.output.schema_file is not None,
            stream=data.output.stream,
            cache_mode=data.cache.mode,
            cache_scope=data.cache.scope,
            caller=data.caller,
            today=today,
            tools=tuple(tools) if tools is not None else None,
            tool_choice=data.tools.choice,
            server_tools=data.tools.server,
        )

    @classmethod
    def of_policy(
        cls,
        policy: Policy,
        model: ModelInfo | None,
        *,
        today: date,
        generation: Generation | None = None,
    ) -> Subject:
        return cls(
            file=Path(policy.source).name if policy.source else f"{policy.task}.toml",
            model_id=model.id if model is not None else policy.model_id,
            model=model,
            generation=generation if generation is not None else policy.generation,
            reproducible=policy.reproducible,
            output_format=policy.output_format,
            has_schema=policy.output_schema is not None,
            stream=policy.stream,
            cache_mode=policy.cache_mode,
            cache_scope=policy.cache_scope,
            caller=policy.caller,
            today=today,
            tools=tuple(policy.tools) if policy.tools is not None else None,
            tool_choice=policy.tool_choice or "auto",
            server_tools=policy.server_tools,
        )


Rule = Callable[[Subject], Iterator[Finding]]
