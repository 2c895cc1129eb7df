"""The audit database's schema and roles, for `gateway db`: no open store is needed.

status = schema_status(settings)         # current and needed revision
upgrade_schema(settings)                 # migrate to the revision this gateway needs
grant_role(settings, "reviewer", read_only=True)
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from audit.store import migrate, roles
from gateway._store_adapter import audit_call
from gateway.settings import Settings

__all__ = ["SchemaStatus", "grant_role", "schema_status", "upgrade_schema"]


class SchemaStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    current: str | None  # None: the database has no schema yet
    head: str  # the revision this gateway needs

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


def upgrade_schema(settings: Settings) -> str | None:
    """Migrate the audit database to the schema this gateway needs; returns its revision."""
    return audit_call(migrate.upgrade, settings.database_url)


def schema_status(settings: Settings) -> SchemaStatus:
    current = audit_call(migrate.current, settings.database_url)
    return SchemaStatus(current=current, head=audit_call(migrate.head_revision))


def grant_role(
    settings: Settings,
    role: str,
    *,
    read_only: bool = False,
    integrator: bool = False,
    eraser: bool = False,
) -> list[str]:
    """Give a PostgreSQL role what the gateway (or, read-only, a reviewer; or the format-2
    integrator) needs; returns the statements run."""
    return audit_call(
        roles.grant,
        settings.database_url,
        role,
        read_only=read_only,
        integrator=integrator,
        eraser=eraser,
    )
