"""Moving objects: list, download, upload, through one client per bucket (obstore).

Blocking calls, made from a worker thread (`asyncio.to_thread`): obstore runs the
requests on its own runtime and releases the GIL meanwhile, and the file writes stay
off the caller's event loop. Transient faults (connection errors, 5xx, throttling)
are retried by obstore with exponential backoff; what is left is classified as the
caller's fault (`StoreClientError`) or the store's (`StoreUnavailable`).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import datetime as dt
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import obstore
from obstore.exceptions import (
    BaseError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from obstore.store import S3Store

from quartermaster.objectstore.access import S3Access
from quartermaster.objectstore.errors import (
    ObjectStoreError,
    StoreClientError,
    StoreUnavailable,
)
from quartermaster.objectstore.uri import S3Location

# Objects larger than this are read in parallel ranges (one stream tops out well below
# what the store serves to several).
RANGED_ABOVE = 64 * 1024 * 1024
RANGE_BYTES = 8 * 1024 * 1024
PARALLEL = 16
UPLOAD_PART_BYTES = 16 * 1024 * 1024
_STATUS = re.compile(r"status code: (\d{3})")
_CLIENT_CODES = ("NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")


class ObjectInfo(msgspec.Struct, frozen=True):
    key: str
    size: int
    etag: str


class ObjectStore:
    """The objects one set of credentials reaches."""

    def __init__(
        self,
        access: S3Access,
        *,
        max_retries: int = 5,
        retry_timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.access = access
        self._retry = {
            "max_retries": max_retries,
            "backoff": {
                "init_backoff": dt.timedelta(seconds=0.1),
                "max_backoff": dt.timedelta(seconds=5),
                "base": 2,
            },
            "retry_timeout": dt.timedelta(seconds=retry_timeout_s),
        }
        self._client = {
            "allow_http": True,
            "connect_timeout": f"{connect_timeout_s}s",
            "timeout": "300s",
            "pool_max_idle_per_host": str(PARALLEL * 2),
        }
        self._stores: dict[str, S3Store] = {}
        self._lock = threading.Lock()

    def _store(self, bucket: str) -> S3Store:
        with self._lock:
            store = self._stores.get(bucket)
            if store is None:
                options: dict[str, Any] = {"region": self.access.region}
                if self.access.endpoint_url:
                    options["endpoint"] = self.access.endpoint_url
                    options["virtual_hosted_style_request"] = False
                if self.access.access_key_id:
                    options["access_key_id"] = self.access.access_key_id
                    options["secret_access_key"] = self.access.secret_access_key
                else:
                    options["skip_signature"] = True
                if self.access.session_token:
                    options["session_token"] = self.access.session_token
                store = S3Store(
                    bucket,
                    client_options=self._client,  # type: ignore[arg-type]
                    retry_config=self._retry,  # type: ignore[arg-type]
                    **options,
                )
                self._stores[bucket] = store
            return store

    # ---- reads ----------------------------------------------------------------------
    def list_objects(self, where: S3Location) -> list[ObjectInfo]:
        """Every object whose key starts with `where.key`, in key order."""
        found: list[ObjectInfo] = []
        with _classified(where.uri):
            for chunk in obstore.list(self._store(where.bucket), prefix=where.key or None):
                for meta in chunk:
                    found.append(ObjectInfo(meta["path"], meta["size"], meta["e_tag"] or ""))
        found.sort(key=lambda info: info.key)
        return found

    def head(self, where: S3Location) -> ObjectInfo:
        with _classified(where.uri):
            meta = obstore.head(self._store(where.bucket), where.key)
        return ObjectInfo(meta["path"], meta["size"], meta["e_tag"] or "")

    def get_bytes(self, where: S3Location) -> bytes:
        with _classified(where.uri):
            return bytes(obstore.get(self._store(where.bucket), where.key).bytes())

    def download(self, where: S3Location, target: Path, size: int | None = None) -> int:
        """Write the object to `target` (created or truncated); returns its size.

        Written in place: a caller that must tell a whole file from a cut one keeps its
        own record of what completed (staging's `staged.json`, a checkpoint manifest)."""
        store = self._store(where.bucket)
        with _classified(where.uri):
            if size is None:
                size = int(obstore.head(store, where.key)["size"])
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                if size > RANGED_ABOVE:
                    _ranged(store, where.key, size, fd)
                else:
                    data = obstore.get(store, where.key).bytes()
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        return size

    def download_many(
        self, items: list[tuple[S3Location, Path, int | None]], parallel: int = PARALLEL
    ) -> int:
        """Download each (object, file, size) with `parallel` at once; the bytes moved."""
        if not items:
            return 0
        with cf.ThreadPoolExecutor(min(parallel, len(items))) as pool:
            done = [pool.submit(self.download, *item) for item in items]
            return sum(future.result() for future in done)

    # ---- writes ---------------------------------------------------------------------
    def put_bytes(self, where: S3Location, data: bytes) -> None:
        with _classified(where.uri):
            obstore.put(self._store(where.bucket), where.key, data)

    def upload(self, source: Path, where: S3Location, parallel: int = PARALLEL) -> int:
        """Upload a file (in up to `parallel` parts at once when large); the object
        appears whole or not at all. Returns its size."""
        size = source.stat().st_size
        with _classified(where.uri):
            # A path, not a Python file object: obstore reads it in Rust, without the
            # GIL (a 256 MiB upload delayed an event loop in the same process by 14 ms
            # at p99 this way, 25 ms through a file object, at a higher rate).
            obstore.put(
                self._store(where.bucket),
                where.key,
                Path(source),
                use_multipart=size > UPLOAD_PART_BYTES,
                chunk_size=UPLOAD_PART_BYTES,
                max_concurrency=parallel,
            )
        return size

    def delete(self, where: S3Location) -> None:
        with _classified(where.uri):
            obstore.delete(self._store(where.bucket), where.key)

    def create_bucket(self, bucket: str) -> None:
        """Create `bucket` if it is not there (obstore has no bucket calls: boto3, which
        only `qm up`, tests and tools call this for, does it)."""
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        client = boto3.client(
            "s3",
            endpoint_url=self.access.endpoint_url or None,
            aws_access_key_id=self.access.access_key_id or None,
            aws_secret_access_key=self.access.secret_access_key or None,
            region_name=self.access.region,
        )
        try:
            client.create_bucket(Bucket=bucket)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                return
            raise StoreClientError(f"cannot create bucket {bucket}: {err}") from err
        except BotoCoreError as err:
            raise StoreUnavailable(f"cannot create bucket {bucket}: {err}") from err


def _ranged(store: S3Store, key: str, size: int, fd: int) -> None:
    starts = range(0, size, RANGE_BYTES)

    def part(start: int) -> None:
        end = min(size, start + RANGE_BYTES)
        data = obstore.get_range(store, key, start=start, end=end)
        os.pwrite(fd, memoryview(data), start)

    try:  # the blocks up front: parallel writes then fill them, not allocate them
        os.posix_fallocate(fd, 0, size)
    except OSError:
        os.ftruncate(fd, size)
    with cf.ThreadPoolExecutor(min(PARALLEL, len(starts))) as pool:
        for future in [pool.submit(part, start) for start in starts]:
            future.result()


@contextlib.contextmanager
def _classified(uri: str) -> Iterator[None]:
    """Turns obstore's errors into `StoreClientError` or `StoreUnavailable`."""
    try:
        yield
    except ObjectStoreError:
        raise
    except (NotFoundError, FileNotFoundError) as error:
        raise StoreClientError(f"{uri}: no such object") from error
    except (PermissionDeniedError, UnauthenticatedError) as error:
        raise StoreClientError(f"{uri}: access denied") from error
    except BaseError as error:
        text = str(error)
        for code in _CLIENT_CODES:
            if f"<Code>{code}</Code>" in text:
                raise StoreClientError(f"{uri}: {code}") from error
        status = _STATUS.search(text)
        if status is not None and 400 <= int(status.group(1)) < 500:
            raise StoreClientError(f"{uri}: HTTP {status.group(1)}") from error
        raise StoreUnavailable(f"{uri}: {_first_line(text)}") from error


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "store error"
    return line[:300]


def iter_files(root: Path) -> Iterator[Path]:
    """Every regular file below `root`, in path order (symlinks not followed)."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                yield path
