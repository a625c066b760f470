"""The NATS passwords of a one-machine stack, kept in a directory only its owner reads.

`qm up` makes each user's password once (`secrets`, 256 bits) and keeps it in
`<dir>/<user>.password` (mode 0600, directory 0700), so a restart on the same data
dir lets the same users in; the server config rendered from them is written there
too. Each service is handed only its own user's password.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from quartermaster.bus.access import NatsCredentials
from quartermaster.files import write_whole

SERVER_CONFIG = "nats-server.conf"


class NatsPasswords:
    """Passwords by NATS user name, created on first use under `directory`."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def password(self, user: str) -> str:
        path = self._path(user)
        with contextlib.suppress(FileNotFoundError):
            return path.read_text().strip()
        write_secret(path, secrets.token_urlsafe(32) + "\n")
        return path.read_text().strip()  # another process may have won the race: theirs

    def password_file(self, user: str) -> Path:
        """Where `user`'s password is kept (made first if missing): what a tool is
        pointed at instead of being handed the password."""
        self.password(user)
        return self._path(user)

    def passwords(self, users: Iterable[str]) -> dict[str, str]:
        return {user: self.password(user) for user in users}

    def credentials(self, user: str) -> NatsCredentials:
        return NatsCredentials(user=user, password=self.password(user))

    def write_server_config(self, text: str) -> Path:
        """Write the rendered server config (it holds every password) with mode 0600."""
        path = self.directory / SERVER_CONFIG
        write_secret(path, text, replace=True)
        return path

    def _path(self, user: str) -> Path:
        if not user or "/" in user or user.startswith("."):
            raise ValueError(f"not a usable NATS user name for a file: {user!r}")
        return self.directory / f"{user}.password"


def write_secret(path: Path, text: str, *, replace: bool = False) -> None:
    """Put `text` at `path` (mode 0600, in a directory only its owner reads); without
    `replace` an existing file is kept (someone made it first)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    write_whole(path, text, keep_existing=not replace)
