"""Authentication: the bearer token of every call becomes the call's principal.

`authorization: Bearer <JWT>` metadata, verified offline against the configured
Ed25519 public key (`quartermaster.auth.tokens`). No token or a bad one:
UNAUTHENTICATED; a role without the RPC's permission: PERMISSION_DENIED
(`access.check_method`). The principal is set in `access.current` for the
servicer, which checks share scope and records it on the events it writes.
Without a key (a plaintext development stack) every caller is an anonymous admin.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

import jwt

from qm_admission import access
from qm_admission.errors import Code, RequestRejected
from qm_admission.interceptors import Streaming, Unary, WrappingInterceptor
from quartermaster.auth import Principal, TokenError, verify_token

CACHE_SIZE = 4096
LEEWAY_S = 30.0  # clock skew allowed past a token's `exp`, by the verify and the cache alike


class Authenticator:
    """Verifies tokens, remembering recent ones (a verify costs tens of microseconds).

    A remembered token is good only until its `exp` (plus the leeway): after that it
    is verified again, and refused as expired, like a token seen for the first time.
    """

    def __init__(self, public_key_pem: bytes) -> None:
        self._key = public_key_pem
        self._verified: OrderedDict[str, tuple[Principal, float]] = OrderedDict()

    def principal(self, metadata: Any) -> Principal:
        values = [v for k, v in (metadata or ()) if k == "authorization"]
        if not values:
            raise _unauthenticated("no credentials: send `authorization: Bearer <token>`")
        scheme, _, token = str(values[0]).partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthenticated("the authorization metadata is not `Bearer <token>`")
        token = token.strip()
        known = self._verified.get(token)
        if known is not None and time.time() <= known[1]:  # PyJWT's clock
            self._verified.move_to_end(token)
            return known[0]
        self._verified.pop(token, None)
        try:
            principal = verify_token(token, self._key, leeway_s=LEEWAY_S)
        except TokenError as err:
            raise _unauthenticated(f"the bearer token is not valid: {err}") from err
        self._verified[token] = (principal, _expires_at(token) + LEEWAY_S)
        if len(self._verified) > CACHE_SIZE:
            self._verified.popitem(last=False)
        return principal


def _expires_at(verified_token: str) -> float:
    """The `exp` claim of a token `verify_token` accepted (it requires one)."""
    claims = jwt.decode(verified_token, options={"verify_signature": False})
    return float(claims["exp"])


def _unauthenticated(message: str) -> RequestRejected:
    return RequestRejected(Code.UNAUTHENTICATED, "authorization", message)


class AuthInterceptor(WrappingInterceptor):
    def __init__(self, authenticator: Authenticator | None) -> None:
        self._authenticator = authenticator

    def skips(self, method: str) -> bool:
        return method.startswith(access.OPEN_PREFIXES)

    def _admit(self, method: str, context: Any) -> Principal:
        if self._authenticator is None:
            return access.ANONYMOUS_ADMIN
        principal = self._authenticator.principal(context.invocation_metadata())
        access.check_method(principal, method)
        return principal

    def unary(self, method: str, behavior: Unary) -> Unary:
        async def call(request: Any, context: Any) -> Any:
            token = access.current.set(self._admit(method, context))
            try:
                return await behavior(request, context)
            finally:
                access.current.reset(token)

        return call

    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        async def call(request: Any, context: Any) -> AsyncIterator[Any]:
            access.current.set(self._admit(method, context))
            async for item in behavior(request, context):
                yield item

        return call
