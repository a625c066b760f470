"""A scheduler identity that survives restarts, held by one live process at a time.

The boot id is kept in a file that the process locks (`flock`, exclusive) for its
whole life. The kernel drops the lock when the process dies, so a process that
gets the lock and finds a boot id there is the same replica restarting: its name
is the one in the lease, and it may take its leases back without waiting for them
to lapse. A second live process on the same file fails to start instead of sharing
the name. The file must be on a local file system (flock is not shared across hosts).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator

import msgspec

from qm_scheduler.settings import SchedulerSettings


class IdentityInUseError(RuntimeError):
    """Another live process holds the identity file."""


@contextlib.contextmanager
def claim(settings: SchedulerSettings) -> Iterator[SchedulerSettings]:
    """`settings` with the boot id from `identity_file` (made there on first use),
    locked until the block ends; unchanged when no identity file is set."""
    if not settings.identity_file:
        yield settings
        return
    fd = os.open(settings.identity_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            raise IdentityInUseError(
                f"QM_SCHEDULER_IDENTITY_FILE={settings.identity_file} is held by another "
                "running scheduler; give each replica its own file"
            ) from err
        boot_id = os.read(fd, 256).decode().strip()
        if not boot_id:
            boot_id = secrets.token_hex(6)
            os.write(fd, boot_id.encode())
            os.fsync(fd)
        yield msgspec.structs.replace(settings, boot_id=boot_id)
    finally:
        os.close(fd)  # closing drops the lock
