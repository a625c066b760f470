"""A real S3 store for the node agent's contract tests: SeaweedFS (`weed`) on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from quartermaster.embedded.errors import ServerBinaryNotFoundError
from quartermaster.embedded.seaweedfs import EmbeddedSeaweedFS, find_weed
from quartermaster.objectstore import RoleMap, S3Access, parse_s3_uri
from quartermaster.objectstore.store import ObjectStore

ROLE = "arn:aws:iam::000000000000:role/quartermaster"


@contextmanager
def running_store(root: Path) -> Iterator[S3Access]:
    """The store `qm up` embeds (`EmbeddedSeaweedFS`), its data and keys under `root`."""
    try:
        find_weed()
    except ServerBinaryNotFoundError as err:
        pytest.skip(f"no SeaweedFS: {err}")
    with EmbeddedSeaweedFS(root / "s3", root / "credentials") as server:
        yield server.access


@contextmanager
def store_with_buckets(root: Path, *buckets: str) -> Iterator[S3Access]:
    """`running_store` with these buckets made (a test module's store fixture)."""
    with running_store(root) as access:
        store = ObjectStore(access)
        for bucket in buckets:
            store.create_bucket(bucket)
        yield access


def role_map_file(path: Path, access: S3Access, role: str = ROLE) -> Path:
    RoleMap(roles={role: access}, default_role=role).save(path)
    return path


def put_tree(store: ObjectStore, base: str, files: dict[str, bytes]) -> None:
    where = parse_s3_uri(base)
    for name, data in files.items():
        store.put_bytes(where.child(name), data)
