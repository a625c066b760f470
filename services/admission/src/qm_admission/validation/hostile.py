"""Values no request may carry, whatever the RPC: checked before any servicer logic.

Postgres `text` and `jsonb` cannot hold U+0000: a NUL that reaches a query fails it
(the client saw INTERNAL), and one that reaches the log stalls the projection. JSON
inside a request (the SageMaker payload) can also spell lone surrogates, NaN or
numbers no int64 holds, which break encoding further down. `check_request` walks
every set field of a request through its protobuf descriptor, so a new RPC or field
is covered without being listed; `check_json` does the same for a parsed JSON value.
Field paths are snake_case with `[i]` for list items and `["key"]` for map keys,
always printable ASCII (they travel in trailing metadata).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from qm_admission.errors import invalid

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_JSON_DEPTH = 32
MAX_KEY_IN_PATH = 64

# NUL, which Postgres text cannot hold, and surrogates, which UTF-8 cannot encode.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_]{1,64}")
_STRING = FieldDescriptor.TYPE_STRING
_ENUM = FieldDescriptor.TYPE_ENUM
_MESSAGE = FieldDescriptor.TYPE_MESSAGE


def check_request(message: Message) -> None:
    """INVALID_ARGUMENT naming the first field that holds an unstorable string or unknown enum."""
    _check_message(message, "")


def check_text(field: str, value: str, part: str = "") -> None:
    """A string must be storable: no NUL, no lone surrogate. `part` says which ("key ")."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return
    at = found.start()
    if found.group() == "\x00":
        raise invalid(field, f"{part}must not contain NUL (\\x00), found at offset {at}")
    raise invalid(field, f"{part}holds a lone surrogate at offset {at} (not valid Unicode)")


def check_json(value: Any, at: str) -> None:
    """Every string and key storable, integers within int64, floats finite, nesting bounded.

    A first walk builds no field paths; only a value it finds wrong is walked again,
    with paths, to name the field.
    """
    if not _json_is_storable(value):
        _check_json_paths(value, at)


def parse_json(text: str, at: str) -> Any:
    """`json.loads(text)` (its ValueError and RecursionError as they are), then
    `check_json`, which most documents skip: their numbers are checked as they are
    parsed, and the text alone shows their strings and nesting to be fine (every
    submission's payload passes here: the walk cost more than the parse)."""
    try:
        value = _CHECKING_NUMBERS.decode(text)
    except _NeedsTheWalk:
        value = json.loads(text)
        check_json(value, at)
        return value
    if not _plain_text(text):
        check_json(value, at)
    return value


def _plain_text(text: str) -> bool:
    """True when no string of the parsed `text` can hold NUL or a lone surrogate (the
    text holds neither, nor any \\u escape; ASCII has no surrogates) and the brackets,
    all counted, are within the depth limit. Else the walk decides."""
    return (
        text.isascii()
        and "\\u" not in text
        and "\x00" not in text
        and text.count("{") + text.count("[") <= MAX_JSON_DEPTH
    )


class _NeedsTheWalk(Exception):
    """A number `check_json` refuses: the walk names where it is."""


def _int64(literal: str) -> int:
    value = int(literal)
    if not INT64_MIN <= value <= INT64_MAX:
        raise _NeedsTheWalk
    return value


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _NeedsTheWalk
    return value


def _no_constant(literal: str) -> float:
    raise _NeedsTheWalk  # NaN, Infinity, -Infinity


_CHECKING_NUMBERS = json.JSONDecoder(
    parse_int=_int64, parse_float=_finite, parse_constant=_no_constant
)


def _json_is_storable(value: Any) -> bool:
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if depth > MAX_JSON_DEPTH:
            return False
        if isinstance(item, str):
            if _UNSTORABLE.search(item) is not None:
                return False
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return False
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, dict):
            for key, child in item.items():
                if _UNSTORABLE.search(key) is not None:
                    return False
                todo.append((child, depth + 1))
        elif isinstance(item, list):
            todo.extend((child, depth + 1) for child in item)
    return True


def _check_json_paths(value: Any, at: str) -> None:
    todo: list[tuple[Any, str, int]] = [(value, at, 0)]
    while todo:
        item, path, depth = todo.pop()
        if depth > MAX_JSON_DEPTH:
            raise invalid(path, f"nests deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, str):
            check_text(path, item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                raise invalid(path, "is a number outside the 64-bit integer range")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise invalid(path, "is not a finite number (NaN, Infinity or too large)")
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                child_path = json_key_path(path, key)
                check_text(child_path, key, "key ")
                children.append((child, child_path, depth + 1))
            todo.extend(reversed(children))  # popped in document order
        elif isinstance(item, list):
            todo.extend(reversed([(c, f"{path}[{i}]", depth + 1) for i, c in enumerate(item)]))


def decimal(field: str, text: str, meaning: str, maximum: int = INT64_MAX) -> int:
    """A non-negative integer given as ASCII decimal text (metadata, filter values).

    `str.isdigit` alone lets through digits `int` refuses ("²") and texts too long
    for `int` to convert; a number past int64 fits no bigint column or log sequence.
    """
    fits = text.isascii() and text.isdigit() and len(text) <= len(str(maximum))
    if not fits or int(text) > maximum:
        raise invalid(field, f"must be {meaning}: a decimal integer 0-{maximum}")
    return int(text)


# ---- the walk over a message ---------------------------------------------------------


def _check_message(message: Message, prefix: str) -> None:
    for field, value in message.ListFields():
        path = prefix + field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for key, item in value.items():
                item_path = _map_key_path(path, key)
                if isinstance(key, str):
                    check_text(item_path, key, "key ")
                _check_value(value_field, item, item_path)
        elif field.is_repeated:
            for i, item in enumerate(value):
                _check_value(field, item, f"{path}[{i}]")
        else:
            _check_value(field, value, path)


def _check_value(field: FieldDescriptor, value: Any, path: str) -> None:
    if field.type == _STRING:
        check_text(path, value)
    elif field.type == _ENUM:
        if value not in field.enum_type.values_by_number:
            raise invalid(path, f"unknown value {value}")
    elif field.type == _MESSAGE:
        _check_message(value, path + ".")


def _map_key_path(path: str, key: object) -> str:
    if not isinstance(key, str):
        return f"{path}[{key}]"
    if len(key) > MAX_KEY_IN_PATH:
        return path  # a long key would bloat the metadata
    # json.dumps escapes controls and non-ASCII but not DEL; metadata takes none of them.
    quoted = json.dumps(key).replace("\x7f", "\\u007f")
    return f"{path}[{quoted}]"


def json_key_path(path: str, key: str) -> str:
    """`path.key` for a plain key, `path["key"]` (JSON-quoted) otherwise."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    return _map_key_path(path, key)
