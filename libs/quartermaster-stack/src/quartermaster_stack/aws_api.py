"""What `qm up` adds for the AWS-compatible endpoint: the admin's access key, the
object store's acceptance of every access key, and the SageMaker SDK's config.

One key pair then serves the whole AWS surface of the stack: boto3 and the SDK sign
Batch, SageMaker, IAM and STS calls to admission with it, and S3 calls to the
embedded SeaweedFS with the same pair (weed's identity file lists every access key
beside the store's own, re-read on SIGHUP when `qm keys` changes them). Jobs keep
the store's own keys (the role map's), which the API does not accept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from quartermaster.auth.access_keys import AccessKey, AccessKeyError, AccessKeyFile
from quartermaster.embedded.seaweedfs import S3Keys

log = logging.getLogger(__name__)

SDK_CONFIG_FILE = "sagemaker-config.yaml"
WATCH_SECONDS = 1.0


def ensure_admin_key(credentials_dir: Path, now: float) -> AccessKey:
    """The admin's access key (subject "admin", role admin), made on the first start."""
    return AccessKeyFile(credentials_dir).ensure_admin_key(now=now)


def store_keys(credentials_dir: Path) -> list[S3Keys]:
    """Every access key as the object store's identity file lists it."""
    keys = AccessKeyFile(credentials_dir)
    return [S3Keys(r.access_key_id, keys.secret_of(r)) for r in keys.records()]


def write_sdk_config(path: Path, bucket: str) -> Path:
    """The SageMaker SDK's config naming the stack's bucket (`SAGEMAKER_USER_CONFIG_OVERRIDE`):
    without it the SDK names its bucket from an STS call to AWS's regional endpoint."""
    text = (
        "SchemaVersion: '1.0'\n"
        "SageMaker:\n"
        "  PythonSDK:\n"
        "    Modules:\n"
        "      Session:\n"
        f"        DefaultS3Bucket: {bucket}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


async def mirror_keys(credentials_dir: Path, apply: Callable[[list[S3Keys]], None]) -> None:
    """Hand every change of the key file to `apply` (runs until cancelled)."""
    path = AccessKeyFile(credentials_dir).path
    seen: tuple[int, int] | None = None
    while True:
        with contextlib.suppress(FileNotFoundError):
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp != seen:
                try:
                    apply(await asyncio.to_thread(store_keys, credentials_dir))
                    seen = stamp
                except (AccessKeyError, OSError, ValueError) as err:
                    log.warning("access keys changed but cannot be read: %s", err)
        await asyncio.sleep(WATCH_SECONDS)
