"""Typed reads of one key of a parsed JSON object, each refusal naming `<at>.<key>`.

What payload checks share: a missing key (None) is absent, "" counts as absent for
strings, and booleans are never integers.
"""

from __future__ import annotations

from typing import Any

from qm_admission.errors import invalid


def an_object(doc: dict[str, Any], key: str, at: str, *, required: bool = False) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        if required:
            raise invalid(f"{at}.{key}", "is required")
        return {}
    if not isinstance(value, dict):
        raise invalid(f"{at}.{key}", "must be a JSON object")
    return value


def a_string(doc: dict[str, Any], key: str, at: str, *, required: bool = False) -> str | None:
    value = doc.get(key)
    if value is None or value == "":
        if required:
            raise invalid(f"{at}.{key}", "is required")
        return None
    if not isinstance(value, str):
        raise invalid(f"{at}.{key}", "must be a string")
    return value


def an_integer(
    doc: dict[str, Any],
    key: str,
    at: str,
    *,
    minimum: int,
    maximum: int | None = None,
    required: bool = False,
) -> int | None:
    value = doc.get(key)
    if value is None:
        if required:
            raise invalid(f"{at}.{key}", "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{at}.{key}", "must be an integer")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise invalid(f"{at}.{key}", f"must be {bound}, got {value}")
    return value


def a_boolean(doc: dict[str, Any], key: str, at: str) -> bool:
    value = doc.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(f"{at}.{key}", "must be true or false")
    return value


def sorted_strings(doc: dict[str, Any], key: str, at: str) -> tuple[str, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"{at}.{key}", "must be a list of strings")
    return tuple(sorted(set(value)))
