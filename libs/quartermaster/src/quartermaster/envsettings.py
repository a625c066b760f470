"""Settings structs read once from prefixed environment variables.

Each field `foo_bar` of a frozen msgspec Struct is read from `<PREFIX>FOO_BAR`;
unset variables keep the field's default; values are converted to the field's
type (tuples from comma-separated lists), and a bad value names the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

S = TypeVar("S", bound=msgspec.Struct)


class SettingsError(ValueError):
    """An environment variable holds a value of the wrong type."""


def from_env(cls: type[S], prefix: str, environ: Mapping[str, str] | None = None) -> S:
    env = os.environ if environ is None else environ
    fields = {f.name: f for f in msgspec.structs.fields(cls)}
    given: dict[str, Any] = {}
    for name, field in fields.items():
        raw = env.get(prefix + name.upper())
        if raw is None:
            continue
        is_tuple = "tuple" in str(field.type)
        given[name] = tuple(v for v in raw.split(",") if v) if is_tuple else raw
    try:
        return msgspec.convert(given, cls, strict=False)
    except msgspec.ValidationError as err:
        raise SettingsError(f"bad {prefix}* setting: {err}") from err
