"""Bearer tokens: JWTs signed with Ed25519, verified offline against the public key.

Asymmetric keys let every admission replica verify tokens while only the holder
of the private key (the operator, `qm up`, `qm token issue`) can mint them.
Claims: `sub`, `roles` (admin|member|auditor), `shares` (`QUEUE/SHARE`, for
members), `iss`, `aud`, `iat`, `exp`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from quartermaster.auth.principal import Principal, Role, ShareRef

ISSUER = "quartermaster"
AUDIENCE = "qm.v1"
ALGORITHM = "EdDSA"
DEFAULT_LIFETIME_S = 365 * 24 * 3600


class TokenError(ValueError):
    """The token is missing a claim, expired, not signed by our key, or malformed."""


def new_signing_key() -> tuple[bytes, bytes]:
    """A fresh Ed25519 key pair as (private PEM, public PEM)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def issue_token(
    private_key_pem: bytes,
    subject: str,
    roles: Iterable[Role],
    shares: Iterable[ShareRef] = (),
    *,
    issued_at: float,
    lifetime_s: float = DEFAULT_LIFETIME_S,
) -> str:
    roles = sorted(set(roles))
    shares = sorted(set(shares))
    if not subject:
        raise TokenError("a token needs a subject")
    if not roles:
        raise TokenError("a token needs at least one role")
    if Role.MEMBER in roles and not shares:
        raise TokenError("a member token needs at least one --share QUEUE/SHARE")
    claims: dict[str, Any] = {
        "sub": subject,
        "roles": [str(r) for r in roles],
        "shares": [str(s) for s in shares],
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": int(issued_at),
        "exp": int(issued_at + lifetime_s),
    }
    key = serialization.load_pem_private_key(private_key_pem, password=None)
    return jwt.encode(claims, key, algorithm=ALGORITHM)  # type: ignore[arg-type]


def verify_token(token: str, public_key_pem: bytes, *, leeway_s: float = 30.0) -> Principal:
    try:
        claims = jwt.decode(
            token,
            public_key_pem,
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            issuer=ISSUER,
            leeway=leeway_s,
            options={"require": ["sub", "exp", "iat", "iss", "aud"]},
        )
        roles = frozenset(Role(r) for r in claims.get("roles", []))
        shares = frozenset(ShareRef.parse(s) for s in claims.get("shares", []))
    except (jwt.PyJWTError, ValueError, TypeError) as err:
        raise TokenError(str(err)) from err
    if not isinstance(claims["sub"], str) or not claims["sub"] or "\x00" in claims["sub"]:
        raise TokenError("the subject claim is not a name")
    return Principal(subject=claims["sub"], roles=roles, shares=shares)
