"""CheckpointConfig: a job's checkpoints follow it to whichever host runs its next attempt.

Before the entrypoint starts, the newest complete checkpoint under `S3Uri` is
restored into `LocalPath` (default /opt/ml/checkpoints). While the job runs, new
and changed files are uploaded within seconds (a file is taken once it has stayed
the same for one scan or for `SETTLE_S`, so a file being written is not sent half
done) and deleted files are deleted. After each round that changed something, a manifest
(`.qm-checkpoint.json`: every file with its size) is written last: a
restore takes exactly the files of the newest manifest, so a round cut short by a
crash or a failed upload is never restored as if complete. Stores written by
something else (no manifest) are restored whole.

A failed round is retried with backoff on the next scans (the adapter also retries
transient faults) and never reported as done; each completed round is reported
(time, bytes) so the log knows how much work a running attempt would lose.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from qm_node_agent.errors import LaunchError
from quartermaster.objectstore import (
    S3Access,
    S3Location,
    StoreClientError,
    StoreUnavailable,
    parse_s3_uri,
)
from quartermaster.objectstore.store import ObjectStore

MANIFEST = ".qm-checkpoint.json"
RESTORED = "checkpoints-restored.json"  # beside the chain's /opt/ml tree
# A file is taken once it stayed the same for a scan, or was last changed this long
# ago (a file rewritten more often than scans still goes up).
SETTLE_S = 0.25
DEFAULT_LOCAL_PATH = "/opt/ml/checkpoints"
# Parts in flight while the job runs: the upload is background work beside the job and
# the agent's own loop (heartbeats, other jobs' starts), not a race to the store.
BACKGROUND_PARTS = 4
ML = "/opt/ml/"


class Checkpoints(msgspec.Struct, frozen=True, kw_only=True):
    """A job's CheckpointConfig, placed on this host."""

    s3_uri: str
    local_path: str  # as the job sees it
    host_dir: str  # where that is on this host (inside the chain's /opt/ml tree)
    # What the last restore left in host_dir (path -> size, mtime): the store holds
    # those files already; anything else there, or changed since, is the job's to upload.
    restored_file: str = ""


class _Entry(msgspec.Struct, frozen=True):
    size: int
    etag: str


def checkpoints_of(payload: dict[str, object], ml_dir: str) -> Checkpoints | None:
    """Raises `LaunchError` (CLIENT_ERROR) for a config the host cannot honour."""
    config = payload.get("CheckpointConfig")
    if config is None:
        return None
    if not isinstance(config, dict):
        raise LaunchError.client("CheckpointConfig must be an object")
    uri = config.get("S3Uri")
    if not isinstance(uri, str) or not uri:
        raise LaunchError.client("CheckpointConfig.S3Uri is required")
    try:
        parse_s3_uri(uri)
    except ValueError as err:
        raise LaunchError.client(f"CheckpointConfig.S3Uri: {err}") from err
    local = config.get("LocalPath") or DEFAULT_LOCAL_PATH
    if not isinstance(local, str):
        raise LaunchError.client("CheckpointConfig.LocalPath must be a string")
    clean = posixpath.normpath(local)
    if not clean.startswith(ML) or ".." in clean.split("/"):
        raise LaunchError.client(
            f"CheckpointConfig.LocalPath {local!r} is outside the job's /opt/ml"
        )
    host_dir = os.path.join(ml_dir, clean[len(ML) :])
    restored = os.path.join(os.path.dirname(ml_dir.rstrip("/")), RESTORED)
    return Checkpoints(s3_uri=uri, local_path=clean, host_dir=host_dir, restored_file=restored)


def _base(uri: str) -> S3Location:
    where = parse_s3_uri(uri)
    return (
        where
        if not where.key or where.key.endswith("/")
        else S3Location(where.bucket, where.key + "/")
    )


def restore(checkpoints: Checkpoints, access: S3Access | None) -> int:
    """Fill the local path with the newest complete checkpoint; the bytes restored.

    Raises `LaunchError`: the client's for a checkpoint the role cannot read, the
    host's for a store that does not answer (the attempt is retried elsewhere,
    without using up the job's attempts)."""
    target = Path(checkpoints.host_dir)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    _save_restored(checkpoints, {})
    if access is None:
        raise LaunchError.client(
            f"CheckpointConfig.S3Uri {checkpoints.s3_uri}: the job's RoleArn maps to no "
            "object-store credentials"
        )
    base = _base(checkpoints.s3_uri)
    store = ObjectStore(access)
    try:
        listing = {info.key: info for info in store.list_objects(base)}
        manifest_key = base.key + MANIFEST
        if manifest_key in listing:
            recorded = msgspec.json.decode(
                store.get_bytes(S3Location(base.bucket, manifest_key)), type=dict[str, _Entry]
            )
            wanted = {name: entry.size for name, entry in recorded.items()}
            missing = [n for n in recorded if base.key + n not in listing]
            if missing:  # deleted under us: not a whole checkpoint
                raise StoreClientError(f"{checkpoints.s3_uri}: manifest names missing {missing}")
        else:
            wanted = {
                key[len(base.key) :]: info.size
                for key, info in listing.items()
                if not key.endswith("/")
            }
        items: list[tuple[S3Location, Path, int | None]] = []
        for name, size in sorted(wanted.items()):
            clean = posixpath.normpath(name)
            if clean.startswith(("../", "/")) or clean in (".", ".."):
                continue
            path = target / clean
            path.parent.mkdir(parents=True, exist_ok=True)
            items.append((S3Location(base.bucket, base.key + name), path, size))
        moved = store.download_many(items)
        _save_restored(checkpoints, _scan(checkpoints.host_dir))
        return moved
    except StoreClientError as err:
        raise LaunchError.client(
            f"CheckpointConfig.S3Uri {checkpoints.s3_uri}: cannot restore: {err}"
        ) from err
    except (StoreUnavailable, msgspec.DecodeError) as err:
        raise LaunchError.infrastructure(
            f"object store unavailable restoring checkpoints from {checkpoints.s3_uri}: {err}"
        ) from err


def _scan(root: str) -> dict[str, tuple[int, int]]:
    """Each regular file under `root` (relative path) with its (size, mtime_ns)."""
    found: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            path = os.path.join(folder, name)
            try:
                stat = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            relative = os.path.relpath(path, root)
            if relative == MANIFEST:
                continue
            found[relative] = (stat.st_size, stat.st_mtime_ns)
    return found


def _save_restored(checkpoints: Checkpoints, files: dict[str, tuple[int, int]]) -> None:
    if checkpoints.restored_file:
        Path(checkpoints.restored_file).write_bytes(msgspec.json.encode(files))


def _load_restored(checkpoints: Checkpoints) -> dict[str, tuple[int, int]]:
    """What the last restore on this host left (nothing known: nothing primed, so
    every file is uploaded once)."""
    try:
        return msgspec.json.decode(
            Path(checkpoints.restored_file).read_bytes(), type=dict[str, tuple[int, int]]
        )
    except (OSError, msgspec.DecodeError):
        return {}


class Round(msgspec.Struct, frozen=True):
    at: float  # when the round's manifest was written
    bytes: int  # uploaded in it
    files: int  # in the checkpoint now


class CheckpointSync:
    """Mirrors the local path to S3; `sync()` runs one round (blocking: call it from a
    worker thread), `flush=True` takes files however recently they changed."""

    def __init__(
        self,
        checkpoints: Checkpoints,
        access: S3Access,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.checkpoints = checkpoints
        self._store = ObjectStore(access)
        self._base = _base(checkpoints.s3_uri)
        self._clock = clock
        self._seen: dict[str, tuple[int, int]] = {}  # path -> (size, mtime_ns) last scan
        self._uploaded: dict[str, tuple[int, int]] = {}  # what the store holds
        self._manifest: dict[str, _Entry] = {}
        self._primed = False
        self._lock = threading.Lock()  # one round at a time (the loop's, the flush)

    def _prime(self) -> None:
        """What the restore left, as it left it: the store already holds that. (Not
        a scan now: the job may have written files before the first round.)"""
        self._primed = True
        for name, stat in _load_restored(self.checkpoints).items():
            self._uploaded[name] = stat
            self._manifest[name] = _Entry(stat[0], "")

    def _scan(self) -> dict[str, tuple[int, int]]:
        return _scan(self.checkpoints.host_dir)

    def sync(self, *, flush: bool = False) -> Round | None:
        """One round; the round when it changed the store, else None. Raises
        `StoreClientError`/`StoreUnavailable` when it could not finish (nothing is
        reported done then; the next round tries again)."""
        with self._lock:
            return self._sync(flush)

    def _sync(self, flush: bool) -> Round | None:
        if not self._primed:
            self._prime()
        now = self._scan()
        settled = time.time_ns() - int(SETTLE_S * 1e9)
        ready = {
            name: stat
            for name, stat in now.items()
            if self._uploaded.get(name) != stat
            and (flush or self._seen.get(name) == stat or stat[1] <= settled)
        }
        gone = [name for name in self._uploaded if name not in now]
        self._seen = now
        if not ready and not gone:
            return None
        moved = 0
        for name, stat in sorted(ready.items()):
            path = Path(self.checkpoints.host_dir) / name
            where = S3Location(self._base.bucket, self._base.key + name)
            moved += self._store.upload(path, where, parallel=BACKGROUND_PARTS)
            self._uploaded[name] = stat
            self._manifest[name] = _Entry(stat[0], "")
        for name in gone:
            self._store.delete(S3Location(self._base.bucket, self._base.key + name))
            self._uploaded.pop(name, None)
            self._manifest.pop(name, None)
        manifest = msgspec.json.encode(dict(sorted(self._manifest.items())))
        self._store.put_bytes(S3Location(self._base.bucket, self._base.key + MANIFEST), manifest)
        return Round(self._clock(), moved, len(self._manifest))
