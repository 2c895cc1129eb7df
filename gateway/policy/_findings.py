"""Review findings: one problem in one policy file, in words a compliance officer can act on.

Finding(Severity.ERROR, rule="model-alias", file="risk.toml", key="model.id",
        message="...", advice="...")
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class Severity(StrEnum):
    ERROR = "error"  # the policy does not load
    WARNING = "warning"  # the policy loads; a reviewer should know


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    severity: Severity
    rule: str
    file: str
    key: str
    message: str
    advice: str

    def line(self) -> str:
        """One line for a terminal: ``error  risk.toml  model.id  message. advice``."""
        return f"{self.severity.value}  {self.file}  {self.key}  {self.message} {self.advice}"


def error(rule: str, file: str, key: str, message: str, advice: str) -> Finding:
    return Finding(
        severity=Severity.ERROR, rule=rule, file=file, key=key, message=message, advice=advice
    )


def warning(rule: str, file: str, key: str, message: str, advice: str) -> Finding:
    return Finding(
        severity=Severity.WARNING, rule=rule, file=file, key=key, message=message, advice=advice
    )


def count(findings: tuple[Finding, ...], severity: Severity) -> int:
    return sum(f.severity is severity for f in findings)
