"""How lists are filtered and paged: SQL conditions, enum spellings, globs, page tokens.

A page token is the last row's sort key with the listing's name, JSON in URL-safe
base64: opaque to clients, and refused by any other listing. Admission seals it with
an HMAC before it leaves the server; `read_token` still refuses any key a query
cannot take (a NUL in text, a number no double holds), so a bad token is always
`InvalidNextTokenError`, never a failed query.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import msgspec

from quartermaster.core.model import HostStatus, JobStatus, WarmPoolStatus
from quartermaster.store.errors import InvalidFilterError, InvalidNextTokenError

DEFAULT_MAX_RESULTS = 100
MAX_RESULTS = 1000


class Where:
    """AND-ed conditions with numbered parameters: `add("x = {}", value)`."""

    def __init__(self, conditions: list[str], args: list[Any]) -> None:
        self.conditions = conditions
        self.args = args

    def add(self, condition: str, *values: Any) -> None:
        numbers = []
        for value in values:
            self.args.append(value)
            numbers.append(f"${len(self.args)}")
        self.conditions.append(condition.format(*numbers))

    def __str__(self) -> str:
        return " AND ".join(self.conditions)


def limit(max_results: int | None) -> int:
    if not max_results or max_results <= 0:
        return DEFAULT_MAX_RESULTS
    return min(max_results, MAX_RESULTS)


def make_token(kind: str, *key: Any) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode([kind, *key])).decode().rstrip("=")


def read_token(token: str, kind: str, *types: type[str] | type[float]) -> list[Any]:
    """The key inside a token made by `make_token(kind, ...)`, checked against `types`."""
    refused = InvalidNextTokenError("next_token is not a token this listing handed out")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decoded = msgspec.json.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError) as err:
        raise refused from err
    if not isinstance(decoded, list) or len(decoded) != len(types) + 1 or decoded[0] != kind:
        raise refused
    key = [_key_part(v, t) for v, t in zip(decoded[1:], types, strict=True)]
    if any(part is None for part in key):
        raise refused
    return key


def _key_part(value: Any, kind: type[str] | type[float]) -> str | float | None:
    """`value` as a query parameter of type `kind`, or None if no query can take it."""
    if kind is str:
        return value if isinstance(value, str) and _storable(value) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _storable(text: str) -> bool:
    """Postgres text holds it: no NUL, and UTF-8 can encode it (no lone surrogate)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching every text that starts with `prefix` (taken literally)."""
    escaped = "".join("\\" + ch if ch in "%_\\" else ch for ch in prefix)
    return escaped + "%"


def like(glob: str) -> str:
    out = []
    for ch in glob:
        if ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        elif ch in "%_\\":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _enum_name(value: str | None, prefix: str) -> str | None:
    """`RUNNING`, `running` or `JOB_STATUS_RUNNING` -> `RUNNING`; empty/UNSPECIFIED -> None."""
    if value is None:
        return None
    name = str(value).upper().removeprefix(prefix)
    return None if name in ("", "UNSPECIFIED") else name


# AWS's status of a job waiting on its dependencies: Quartermaster jobs have none, so a
# listing of it is empty (it names no stored status) rather than refused.
NEVER_HELD = frozenset({"PENDING"})


def job_status(value: str | None) -> str | None:
    name = _enum_name(value, "JOB_STATUS_")
    if name is not None and name not in JobStatus.__members__ and name not in NEVER_HELD:
        raise InvalidFilterError(f"unknown job status {value!r}")
    return name


def pool_status(value: str | None) -> str | None:
    """Stored as the core value (`Available`, `InUse`, ...); any spelling accepted."""
    name = _enum_name(value, "WARM_POOL_STATUS_")
    if name is None:
        return None
    for status in WarmPoolStatus:
        if name.replace("_", "") == status.name.replace("_", ""):
            return status.value
    raise InvalidFilterError(f"unknown warm pool status {value!r}")


def node_state(value: str | None) -> str | None:
    name = _enum_name(value, "NODE_STATE_")
    if name is not None and name not in HostStatus.__members__:
        raise InvalidFilterError(f"unknown node state {value!r}")
    return None if name is None else f"NODE_STATE_{name}"
