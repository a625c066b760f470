"""AWS JSON members into qm.v1 request messages, by the messages' own JSON names.

The qm.v1 requests are named after the AWS operations, member for member
(`jobQueue` is `job_queue`'s JSON name), so one walk over the descriptor serves
every operation: strings stay strings, numbers must be JSON integers in range,
enum values are AWS's (`"RUNNING"` for `JOB_STATUS_RUNNING`), maps and lists
hold what their field does. A member the message does not have, or a value of
the wrong type, is INVALID_ARGUMENT naming the field (snake_case, as the gRPC
API names it; `errors.aws_field` spells it back in AWS's camelCase).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from qm_admission.errors import invalid

M = TypeVar("M", bound=Message)

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
}
_JSON_TYPE = {
    FieldDescriptor.TYPE_STRING: "a string",
    FieldDescriptor.TYPE_BOOL: "a boolean",
    FieldDescriptor.TYPE_DOUBLE: "a number",
    FieldDescriptor.TYPE_FLOAT: "a number",
    FieldDescriptor.TYPE_ENUM: "a string",
    FieldDescriptor.TYPE_MESSAGE: "an object",
}


def _enum_prefix(enum: EnumDescriptor) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def _enum_number(enum: EnumDescriptor, text: str, field: str) -> int:
    prefix = _enum_prefix(enum)
    value = enum.values_by_name.get(prefix + text) if text != "UNSPECIFIED" else None
    if value is None:
        choices = ", ".join(
            v.name.removeprefix(prefix) for v in enum.values if not v.name.endswith("UNSPECIFIED")
        )
        raise invalid(field, f"must be one of {choices}, got {text!r}")
    return int(value.number)


def _scalar(field: FieldDescriptor, value: Any, path: str) -> Any:
    kind = field.type
    if kind in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(path, f"must be an integer, got {type(value).__name__}")
        low, high = _INT_RANGES[kind]
        if not low <= value <= high:
            raise invalid(path, f"must be between {low} and {high}")
        return value
    if kind == FieldDescriptor.TYPE_ENUM:
        if not isinstance(value, str):
            raise invalid(path, f"must be a string, got {type(value).__name__}")
        return _enum_number(field.enum_type, value, path)
    expected: Any = {
        FieldDescriptor.TYPE_STRING: str,
        FieldDescriptor.TYPE_BOOL: bool,
        FieldDescriptor.TYPE_DOUBLE: (int, float),
        FieldDescriptor.TYPE_FLOAT: (int, float),
    }.get(kind, str)
    if not isinstance(value, expected) or (
        isinstance(value, bool) and kind != FieldDescriptor.TYPE_BOOL
    ):
        raise invalid(
            path, f"must be {_JSON_TYPE.get(kind, 'a string')}, got {type(value).__name__}"
        )
    return value


def _is_map(field: FieldDescriptor) -> bool:
    entry = field.message_type
    return entry is not None and entry.GetOptions().map_entry


def _fill(message: Message, data: Any, path: str) -> None:
    if not isinstance(data, dict):
        raise invalid(path, f"must be an object, got {type(data).__name__}")
    descriptor: Descriptor = message.DESCRIPTOR
    by_json = {f.json_name: f for f in descriptor.fields}
    for key, value in data.items():
        field = by_json.get(key)
        name = f"{path}.{key}" if path else str(key)
        if field is None:
            raise invalid(name, "is not a member of this operation's input")
        name = f"{path}.{field.name}" if path else field.name
        if value is None:
            continue  # JSON null: as if absent
        try:
            _set(message, field, value, name)
        except UnicodeEncodeError:  # JSON's "\ud800": a string protobuf cannot hold
            raise invalid(name, "must be Unicode text: a lone surrogate is not") from None


def _set(message: Message, field: FieldDescriptor, value: Any, name: str) -> None:
    if _is_map(field):
        if not isinstance(value, dict):
            raise invalid(name, f"must be an object, got {type(value).__name__}")
        value_field = field.message_type.fields_by_name["value"]
        target = getattr(message, field.name)
        for k, v in value.items():
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                _fill(target[k], v, f"{name}.{k}")
            else:
                target[k] = _scalar(value_field, v, f"{name}.{k}")
    elif field.label == FieldDescriptor.LABEL_REPEATED:
        if not isinstance(value, list):
            raise invalid(name, f"must be a list, got {type(value).__name__}")
        target = getattr(message, field.name)
        for index, item in enumerate(value):
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                _fill(target.add(), item, f"{name}[{index}]")
            else:
                target.append(_scalar(field, item, f"{name}[{index}]"))
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        sub = getattr(message, field.name)
        _fill(sub, value, name)
        sub.SetInParent()
    else:
        setattr(message, field.name, _scalar(field, value, name))


def request_from(data: Any, cls: type[M]) -> M:
    """The `cls` request the AWS JSON `data` describes (INVALID_ARGUMENT if it cannot)."""
    message: M = cls()
    _fill(message, data, "")
    return message
