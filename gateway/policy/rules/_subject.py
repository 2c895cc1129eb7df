"""What a review rule looks at: one policy next to its model's capabilities.

subject = Subject.of_policy(policy, catalog.get(policy.model.id), today=date.today())
findings = [f for rule in RULES for f in rule(subject)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from gateway.catalog import ModelInfo
from gateway.policy._findings import Finding
from gateway.policy._schema import Policy


@dataclass(frozen=True)
class Subject:
    file: str  # the file findings name
    policy: Policy  # as written with the files it names read, or as loaded or recorded
    model: ModelInfo | None  # the model it runs on (None: not in the catalog)
    today: date

    @property
    def model_id(self) -> str:
        return self.model.id if self.model is not None else self.policy.model.id

    @classmethod
    def of_policy(cls, policy: Policy, model: ModelInfo | None, *, today: date) -> Subject:
        file = Path(policy.source).name if policy.source else f"{policy.task}.toml"
        return cls(file, policy, model, today)


Rule = Callable[[Subject], Iterator[Finding]]
