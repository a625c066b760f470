"""AWS access keys (SigV4) bound to principals, as bearer tokens are.

SigV4 is an HMAC over the request with a key derived from the secret, so the
server must hold the secret itself: it cannot keep only a hash. Each secret is
sealed instead (AES-256-GCM, the key id as associated data) with a key kept in a
file of its own (`aws-keys.seal`, mode 0600), and the sealed records live in
`aws-keys.json` beside it. Whoever reads the records alone learns no secret;
admission holds both files, as it holds the token verify key.

`qm keys issue` adds a key and shows its secret once; `qm keys revoke` removes
it. Admission's `KeyRing` re-reads the records when the file changes, so issued
and revoked keys take effect without a restart.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from quartermaster.auth.principal import Principal, Role, ShareRef
from quartermaster.files import Stamp, stamp_of, write_whole

log = logging.getLogger(__name__)

KEYS_FILE = "aws-keys.json"
LOCK_FILE = ".aws-keys.lock"
SEAL_FILE = "aws-keys.seal"
KEY_ID_PREFIX = "QMAK"
ADMIN_SUBJECT = "admin"  # the key a stack or a deployment starts with
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # base32, as AWS key ids are written


class AccessKeyError(ValueError):
    """A key that cannot be issued, found or opened."""


class AccessKey(msgspec.Struct, frozen=True, kw_only=True):
    """One key: who it speaks for, and its sealed secret (never the secret itself)."""

    access_key_id: str
    subject: str
    roles: tuple[Role, ...]
    shares: tuple[str, ...] = ()
    sealed_secret: str  # base64 of nonce (12 bytes) + AES-GCM ciphertext
    created_at: float

    def principal(self) -> Principal:
        return Principal(
            subject=self.subject,
            roles=frozenset(self.roles),
            shares=frozenset(ShareRef.parse(s) for s in self.shares),
        )


class _Records(msgspec.Struct):
    keys: list[AccessKey] = []


def new_key_id() -> str:
    """20 characters, as AWS's: the prefix and 16 base32 characters."""
    return KEY_ID_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(16))


def new_secret() -> str:
    """40 characters, as AWS's."""
    return secrets.token_urlsafe(30)


class AccessKeyFile:
    """The records and seal key in `directory` (created on the first issue)."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / KEYS_FILE
        self.seal_path = self.directory / SEAL_FILE

    def _seal_key(self, *, create: bool) -> bytes:
        if not self.seal_path.exists():
            if not create:
                raise AccessKeyError(f"no seal key {self.seal_path}")
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            key = AESGCM.generate_key(bit_length=256).hex().encode()
            # Made once, and whole before its name exists: whoever loses the race reads
            # the winner's key, never a half-written file.
            write_whole(self.seal_path, key, sync=True, keep_existing=True)
        return bytes.fromhex(self.seal_path.read_text().strip())

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time (`qm keys issue` run twice at once, a bootstrap...)."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def records(self) -> list[AccessKey]:
        if not self.path.exists():
            return []
        try:
            return msgspec.json.decode(self.path.read_bytes(), type=_Records).keys
        except msgspec.DecodeError as err:
            raise AccessKeyError(f"cannot read {self.path}: {err}") from err

    def add(
        self,
        subject: str,
        roles: Iterable[Role],
        shares: Iterable[ShareRef] = (),
        *,
        now: float,
        access_key_id: str | None = None,
        secret: str | None = None,
    ) -> tuple[AccessKey, str]:
        """A new key for the principal; returns it with its secret (shown once).

        `access_key_id` and `secret` register a pair made elsewhere (`qm up`'s own
        object-store identity for the admin); a key id already present is refused.
        """
        role_set = sorted(set(roles))
        share_list = sorted({str(s) for s in shares})
        if not subject:
            raise AccessKeyError("a key needs a subject")
        if not role_set:
            raise AccessKeyError("a key needs a role")
        if Role.MEMBER in role_set and not share_list:
            raise AccessKeyError("a member key needs at least one --share QUEUE/SHARE")
        with self._locked():
            return self._add(
                subject, role_set, share_list, now, access_key_id or new_key_id(), secret
            )

    def _add(
        self,
        subject: str,
        role_set: list[Role],
        share_list: list[str],
        now: float,
        key_id: str,
        secret: str | None,
    ) -> tuple[AccessKey, str]:
        secret = secret or new_secret()
        existing = self.records()
        if any(k.access_key_id == key_id for k in existing):
            raise AccessKeyError(f"access key {key_id} exists already")
        nonce = secrets.token_bytes(12)
        sealed = AESGCM(self._seal_key(create=True)).encrypt(
            nonce, secret.encode(), key_id.encode()
        )
        record = AccessKey(
            access_key_id=key_id,
            subject=subject,
            roles=tuple(role_set),
            shares=tuple(share_list),
            sealed_secret=base64.b64encode(nonce + sealed).decode(),
            created_at=now,
        )
        self._save([*existing, record])
        return record, secret

    def ensure_admin_key(self, *, now: float) -> AccessKey:
        """The admin's key (subject "admin", role admin): the one there, else a new one
        (`qm deploy bootstrap` makes it on its first run and keeps it on reruns)."""
        with self._locked():
            found = self.admin_key()
            if found is not None:
                return found
            record, _ = self._add(ADMIN_SUBJECT, [Role.ADMIN], [], now, new_key_id(), None)
            return record

    def admin_key(self) -> AccessKey | None:
        """The admin's key (subject "admin", role admin), if there is one."""
        return next(
            (r for r in self.records() if r.subject == ADMIN_SUBJECT and Role.ADMIN in r.roles),
            None,
        )

    def revoke(self, access_key_id: str) -> AccessKey:
        with self._locked():
            existing = self.records()
            kept = [k for k in existing if k.access_key_id != access_key_id]
            if len(kept) == len(existing):
                raise AccessKeyError(f"no access key {access_key_id}")
            self._save(kept)
            return next(k for k in existing if k.access_key_id == access_key_id)

    def secret_of(self, record: AccessKey) -> str:
        """The record's secret, unsealed (for `qm aws-env` and admission)."""
        raw = base64.b64decode(record.sealed_secret)
        try:
            plain = AESGCM(self._seal_key(create=False)).decrypt(
                raw[:12], raw[12:], record.access_key_id.encode()
            )
        except InvalidTag as err:
            raise AccessKeyError(f"access key {record.access_key_id}: wrong seal key") from err
        return plain.decode()

    def _save(self, records: list[AccessKey]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_whole(self.path, msgspec.json.encode(_Records(keys=records)) + b"\n", sync=True)


class KeyRing:
    """Admission's view of the keys: id -> (secret, principal), re-read on change.

    A missing file is an empty ring (every signed request is refused as an unknown
    key). A record that cannot be opened (another seal key) is left out, with a warning;
    a file that cannot be read at all keeps the last good ring, with a warning once.
    """

    def __init__(self, directory: Path | str) -> None:
        self._file = AccessKeyFile(directory)
        self._stamp: Stamp | None = None
        self._keys: dict[str, tuple[bytes, Principal]] = {}
        self.problem: str | None = None

    def _refresh(self) -> None:
        stamp = stamp_of(self._file.path)
        if stamp is None:
            self._keys, self._stamp = {}, None
            return
        if stamp == self._stamp:
            return
        try:
            records = self._file.records()
        except (AccessKeyError, OSError) as err:
            if self.problem != str(err):
                log.warning("access keys unreadable, keeping the last ones read: %s", err)
            self.problem = str(err)
            return
        keys: dict[str, tuple[bytes, Principal]] = {}
        for record in records:
            try:
                keys[record.access_key_id] = (
                    self._file.secret_of(record).encode(),
                    record.principal(),
                )
            except (AccessKeyError, OSError, ValueError) as err:
                log.warning("access key %s left out: %s", record.access_key_id, err)
        self._keys, self._stamp, self.problem = keys, stamp, None

    def lookup(self, access_key_id: str) -> tuple[bytes, Principal] | None:
        self._refresh()
        return self._keys.get(access_key_id)
