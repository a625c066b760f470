"""Files replaced whole: a reader sees the old bytes or the new ones, never half of either.

One home for the write-then-rename that credentials, key files, `stack.json`, role maps
and the node agent's per-attempt files need. The temporary file has a name of its own
(two writers never share one) and is created with its final mode, so a private file is
never readable by others, not even while it is being written.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_whole(
    path: Path | str,
    data: bytes | str,
    *,
    mode: int = 0o600,
    sync: bool = False,
    keep_existing: bool = False,
) -> bool:
    """Put `data` at `path` whole, with `mode` (0600 unless told; the umask applies).

    `sync` flushes the bytes to disk before the rename (for a file whose loss after a
    crash would lose what it alone holds). `keep_existing` keeps a file someone made
    first (a hard link fails where the name exists) and returns False then.
    """
    target = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            if sync:
                out.flush()
                os.fsync(out.fileno())
        if not keep_existing:
            os.replace(tmp, target)
            return True
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


Stamp = tuple[int, int, int]


def stamp_of(path: Path | str) -> Stamp | None:
    """What tells a rewrite of `path` from the file last read: (inode, mtime, size), None
    where there is none. The inode is there because `write_whole` renames a new file in:
    a rewrite within one tick of the file system's clock, at the same size, still shows.
    A file that cannot be looked at (gone, or no right to) is None too."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
