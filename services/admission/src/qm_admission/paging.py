"""Paging of lists that admission cuts itself: an offset in an opaque token."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TypeVar

from qm_admission.errors import invalid

T = TypeVar("T")

DEFAULT_PAGE = 100
MAX_PAGE = 1000


def page_size(max_results: int) -> int:
    """0 = the default page; more than MAX_PAGE is cut to MAX_PAGE."""
    if max_results < 0:
        raise invalid("max_results", f"must be >= 0, got {max_results}")
    return min(max_results or DEFAULT_PAGE, MAX_PAGE)


def page(items: Sequence[T], max_results: int, next_token: str) -> tuple[list[T], str]:
    size = page_size(max_results)
    start = _offset(next_token)
    end = start + size
    return list(items[start:end]), (_token(end) if end < len(items) else "")


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def _offset(token: str) -> int:
    if not token:
        return 0
    try:
        kind, _, number = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if kind == "o" and number.isdigit():
            return int(number)
    except ValueError:
        pass
    raise invalid("next_token", "is not a token this list returned")
