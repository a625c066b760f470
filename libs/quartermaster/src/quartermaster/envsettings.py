"""Settings structs read once from prefixed environment variables.

Each field `foo_bar` of a frozen msgspec Struct is read from `<PREFIX>FOO_BAR`;
unset variables keep the field's default; values are converted to the field's
type (tuples from comma-separated lists), and a bad value names the variable.

A text field `foo` may instead be read from a file: `<PREFIX>FOO_FILE` names it (the
Docker and Kubernetes secrets convention), so a password or key lives on a mounted
volume, not in the environment; unless the struct has a field `foo_file` of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
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
        raw = _from_file(env, prefix, name, fields) if raw is None else raw
        if raw is None:
            continue
        is_tuple = "tuple" in str(field.type)
        given[name] = tuple(v for v in raw.split(",") if v) if is_tuple else raw
    try:
        return msgspec.convert(given, cls, strict=False)
    except msgspec.ValidationError as err:
        raise SettingsError(f"bad {prefix}* setting: {err}") from err


def _from_file(
    env: Mapping[str, str], prefix: str, name: str, fields: Mapping[str, msgspec.structs.FieldInfo]
) -> str | None:
    """The contents of the file `<PREFIX><NAME>_FILE` names (one trailing newline dropped)."""
    variable = f"{prefix}{name.upper()}_FILE"
    path = env.get(variable)
    if path is None or f"{name}_file" in fields or fields[name].type is not str:
        return None
    try:
        return Path(path).read_text().removesuffix("\n")
    except OSError as err:
        raise SettingsError(f"{variable}={path!r}: {err.strerror or err}") from err
