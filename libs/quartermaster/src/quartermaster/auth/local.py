"""The credentials directory of a one-machine stack (`<data-dir>/credentials/`).

`qm up` creates it once and reuses it on every start (tokens and certificates
stay valid across restarts); the `qm` CLI and the Python client read
`ca.pem` and `admin.token` from it. Private keys are mode 0600.

    ca.pem, ca-key.pem          the local certificate authority
    server.pem, server-key.pem  admission's TLS certificate (localhost, 127.0.0.1)
    token-signing.pem           Ed25519 key that signs bearer tokens (`qm token issue`)
    token-verify.pem            its public key, which admission verifies tokens with
    admin.token                 a bearer token for subject "admin", role admin
    page-token.key              the HMAC key admission seals page tokens with
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from quartermaster.auth import pki
from quartermaster.auth.principal import Role, ShareRef
from quartermaster.auth.tokens import issue_token, new_signing_key
from quartermaster.files import write_whole

SERVER_NAMES = ("localhost", "127.0.0.1", "::1")


def _write(path: Path, data: bytes, *, private: bool) -> None:
    write_whole(path, data, mode=0o600 if private else 0o644)


class LocalCredentials(msgspec.Struct, frozen=True):
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def server_cert(self) -> Path:
        return self.directory / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.directory / "server-key.pem"

    @property
    def signing_key(self) -> Path:
        return self.directory / "token-signing.pem"

    @property
    def verify_key(self) -> Path:
        return self.directory / "token-verify.pem"

    @property
    def admin_token(self) -> Path:
        return self.directory / "admin.token"

    @property
    def page_token_key(self) -> Path:
        return self.directory / "page-token.key"

    @classmethod
    def ensure(
        cls,
        directory: Path,
        now: dt.datetime,
        *,
        server_names: Sequence[str] = SERVER_NAMES,
    ) -> LocalCredentials:
        """The directory's credentials, creating whatever is missing (never replacing)."""
        creds = cls(Path(directory))
        creds.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        ca_key = creds.directory / "ca-key.pem"
        if not creds.ca.exists() or not ca_key.exists():
            ca = pki.new_ca("Quartermaster local CA", now)
            _write(ca_key, ca.key_pem, private=True)
            _write(creds.ca, ca.cert_pem, private=False)
        if not creds.server_cert.exists() or not creds.server_key.exists():
            leaf = pki.issue_leaf(creds.authority(), "admission", now, server_names=server_names)
            _write(creds.server_key, leaf.key_pem, private=True)
            _write(creds.server_cert, leaf.cert_pem, private=False)
        if not creds.signing_key.exists() or not creds.verify_key.exists():
            private, public = new_signing_key()
            _write(creds.signing_key, private, private=True)
            _write(creds.verify_key, public, private=False)
            creds.admin_token.unlink(missing_ok=True)  # signed by the old key
        if not creds.page_token_key.exists():
            _write(creds.page_token_key, secrets.token_hex(32).encode(), private=True)
        if not creds.admin_token.exists():
            token = creds.issue("admin", [Role.ADMIN], issued_at=now.timestamp())
            _write(creds.admin_token, token.encode(), private=True)
        return creds

    def authority(self) -> pki.KeyPair:
        return pki.KeyPair(self.ca.read_bytes(), (self.directory / "ca-key.pem").read_bytes())

    def issue(
        self,
        subject: str,
        roles: Iterable[Role],
        shares: Iterable[ShareRef] = (),
        *,
        issued_at: float,
        lifetime_s: float | None = None,
    ) -> str:
        """A bearer token signed with this directory's key."""
        extra = {} if lifetime_s is None else {"lifetime_s": lifetime_s}
        return issue_token(
            self.signing_key.read_bytes(), subject, roles, shares, issued_at=issued_at, **extra
        )

    def service_cert(
        self, name: str, now: dt.datetime, server_names: Sequence[str] = ()
    ) -> tuple[Path, Path]:
        """A certificate for service `name` (client auth; server auth for `server_names`)."""
        cert = self.directory / f"{name}.pem"
        key = self.directory / f"{name}-key.pem"
        if not cert.exists() or not key.exists():
            leaf = pki.issue_leaf(self.authority(), name, now, server_names=server_names)
            _write(key, leaf.key_pem, private=True)
            _write(cert, leaf.cert_pem, private=False)
        return cert, key
