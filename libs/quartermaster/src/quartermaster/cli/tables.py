"""Readable tables for the terminal (no dependency: plain padded columns)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf.message import Message


def when(ms: int) -> str:
    if not ms:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%H:%M:%S")


def enum_name(message: Message, field: str) -> str:
    """`JOB_STATUS_RUNNING` -> `RUNNING`, from the field's enum descriptor."""
    descriptor = message.DESCRIPTOR.fields_by_name[field].enum_type
    value = getattr(message, field)
    name = descriptor.values_by_number[value].name if value in descriptor.values_by_number else "?"
    return name.removeprefix(descriptor.values[0].name.removesuffix("UNSPECIFIED"))


def render(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    body = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in body
    ]
    return "\n".join(lines)
