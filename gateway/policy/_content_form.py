"""The policy's content: the JSON form its fingerprint covers and the audit log stores.

    class OutputTable(BaseModel):
        stream: Annotated[StreamMode, In(omitted="may")] = "may"

    content = to_content(policy)            # JSON-safe dict, as hashed
    fields = from_content(Policy, content)  # back to the policy's own nested shape

Each field says in its annotation how it appears (:class:`In`): under which key, whether it is
left out while it has a given value, whether its table's fields sit at the top level, whether
it is no part of the content at all (file names) and whether only the loader sets it. A field
with no marker appears under its own name, always. Recorded content keeps its layout forever
(old audit logs point at its digest), so a new field is left out while it has its default:
policies that do not use it keep their fingerprints.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python


class _Always:
    def __repr__(self) -> str:
        return "ALWAYS"


ALWAYS: Any = _Always()  # a field written whatever its value


@dataclass(frozen=True)
class In:
    """How a field appears in the policy's content (see the module docstring)."""

    key: str | None = None  # its key in the content, when not its own name
    omitted: Any = ALWAYS  # left out while it has this value; read back as it when absent
    flatten: bool = False  # a table whose fields sit at the top level of the content
    left_out: bool = False  # no part of the content (where a file was read from)
    loaded: bool = False  # set by the loader (resolved files, derivation), never in a file


PLAIN = In()


def mark(info: FieldInfo) -> In:
    return next((m for m in info.metadata if isinstance(m, In)), PLAIN)


def _is_table(info: FieldInfo) -> bool:
    return isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)


def _table(info: FieldInfo) -> type[BaseModel]:
    table = info.annotation
    assert isinstance(table, type) and issubclass(table, BaseModel), info
    return table


def to_content(model: BaseModel) -> dict[str, Any]:
    content: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        how = mark(info)
        value = getattr(model, name)
        if how.left_out or (how.omitted is not ALWAYS and value == how.omitted):
            continue
        if how.flatten:
            content.update(to_content(value))
        elif isinstance(value, BaseModel):
            content[how.key or name] = to_content(value)
        else:
            content[how.key or name] = to_jsonable_python(value)
    return content


def from_content(model: type[BaseModel], content: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``model`` from its content; keys it does not know are passed on as they
    are, so validating the result refuses them."""
    rest = dict(content)
    fields = _take(model, rest)
    return {**fields, **rest}


def _take(model: type[BaseModel], rest: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        how = mark(info)
        if how.left_out:
            continue
        if how.flatten:
            fields[name] = _take(_table(info), rest)
        elif (how.key or name) in rest:
            fields[name] = rest.pop(how.key or name)
        elif how.omitted is not ALWAYS:
            fields[name] = how.omitted
    return fields


def loaded_only_keys(model: type[BaseModel], written: dict[str, Any]) -> Iterator[str]:
    """The keys of a policy file (``written``) that only the loader may set, dotted."""
    for name, info in model.model_fields.items():
        how = mark(info)
        if how.loaded and name in written:
            yield name
        elif isinstance(written.get(name), dict) and _is_table(info):
            inner = loaded_only_keys(_table(info), written[name])
            yield from (f"{name}.{key}" for key in inner)
