"""What `qm up` adds for the AWS-compatible endpoint: the admin's access key, the
object store's acceptance of every access key, and the SageMaker SDK's config.

One key pair then serves the whole AWS surface of the stack: boto3 and the SDK sign
Batch, SageMaker, IAM and STS calls to admission with it, and S3 calls to the
embedded SeaweedFS with the same pair (weed's identity file lists every access key
beside the store's own, re-read on SIGHUP when `qm keys` changes them). In the store
an admin key may do anything; a member's reads and writes objects of the stack's
bucket (as the jobs it submits may, with the role map's keys) but makes and removes no
buckets; an auditor's reads them. Jobs keep the store's own keys, which the API refuses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from quartermaster.auth import Role
from quartermaster.auth.access_keys import AccessKey, AccessKeyError, AccessKeyFile
from quartermaster.embedded.seaweedfs import ALL_ACTIONS, Identity, S3Keys
from quartermaster.files import Stamp, stamp_of, write_whole

log = logging.getLogger(__name__)

WATCH_SECONDS = 1.0


def ensure_admin_key(credentials_dir: Path, now: float) -> AccessKey:
    """The admin's access key (subject "admin", role admin), made on the first start."""
    return AccessKeyFile(credentials_dir).ensure_admin_key(now=now)


def store_identities(credentials_dir: Path, bucket: str) -> list[Identity]:
    """Every access key as the object store's identity file lists it, with what its
    role may do there."""
    keys = AccessKeyFile(credentials_dir)
    found = []
    for record in keys.records():
        if Role.ADMIN in record.roles:
            actions: tuple[str, ...] = ALL_ACTIONS
        elif Role.MEMBER in record.roles:
            actions = tuple(f"{a}:{bucket}" for a in ("Read", "Write", "List", "Tagging"))
        else:
            actions = (f"Read:{bucket}", f"List:{bucket}")
        found.append(Identity(S3Keys(record.access_key_id, keys.secret_of(record)), actions))
    return found


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
    write_whole(path, text)
    return path


async def mirror_keys(
    credentials_dir: Path, bucket: str, apply: Callable[[list[Identity]], None]
) -> None:
    """Hand every change of the key file to `apply` (runs until cancelled)."""
    path = AccessKeyFile(credentials_dir).path
    seen: Stamp | None = None
    while True:
        stamp = stamp_of(path)
        if stamp is not None and stamp != seen:
            try:
                apply(await asyncio.to_thread(store_identities, credentials_dir, bucket))
                seen = stamp
            except (AccessKeyError, OSError, ValueError) as err:
                log.warning("access keys changed but cannot be read: %s", err)
        await asyncio.sleep(WATCH_SECONDS)
