"""Page tokens: admission's own offsets, and the seal on every token it hands out.

Lists admission cuts itself page by an offset in an opaque token; the read model's
lists page by keyset tokens. Either kind leaves the server sealed by `PageTokenSeal`
(HMAC-SHA256 over the RPC and the token), and a request's token is opened before
any servicer reads it, so a forged, edited or truncated token is refused as
INVALID_ARGUMENT on `next_token` and never reaches a query. Replicas that share
`page_token_secret` accept each other's tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from collections.abc import Sequence
from typing import TypeVar

from qm_admission.errors import invalid

T = TypeVar("T")

log = logging.getLogger(__name__)

DEFAULT_PAGE = 100
MAX_PAGE = 1000
MAX_TOKEN_CHARS = 1024
_MAC_BYTES = 16  # 128-bit tags: forging one is out of reach, tokens stay short
_SEPARATOR = "."  # not in the URL-safe base64 alphabet
_REFUSED = "is not a token this list returned"


class PageTokenSeal:
    """Seals the tokens a list RPC answers with, and opens the ones a request brings back."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_secret(cls, secret: str) -> PageTokenSeal:
        """A seal keyed by `secret`; empty = a random key, valid only in this process."""
        if secret:
            return cls(secret.encode("utf-8", "surrogateescape"))
        log.warning(
            "page_token_secret is not set: page tokens get a random key and only work "
            "against this replica (set QM_ADMISSION_PAGE_TOKEN_SECRET on every replica)"
        )
        return cls(secrets.token_bytes(32))

    def seal(self, method: str, token: str) -> str:
        return f"{token}{_SEPARATOR}{self._mac(method, token)}"

    def open(self, method: str, sealed: str) -> str:
        """The token `seal(method, ...)` was given; INVALID_ARGUMENT on `next_token` otherwise."""
        token, separator, mac = sealed.rpartition(_SEPARATOR)
        if (
            len(sealed) > MAX_TOKEN_CHARS
            or not separator
            or not sealed.isascii()
            or not hmac.compare_digest(mac, self._mac(method, token))
        ):
            raise invalid("next_token", _REFUSED)
        return token

    def _mac(self, method: str, token: str) -> str:
        message = f"qm-page-token/1\n{method}\n{token}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()[:_MAC_BYTES]
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


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
        if kind == "o" and number.isascii() and number.isdigit() and len(number) <= 18:
            return int(number)
    except ValueError:
        pass
    raise invalid("next_token", _REFUSED)
