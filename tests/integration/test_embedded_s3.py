"""SeaweedFS's S3 server embedded as `qm up` runs it, used through the store adapter."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from quartermaster.embedded.seaweedfs import KEYS_FILE, EmbeddedSeaweedFS
from quartermaster.objectstore import S3Access, S3Location, StoreClientError
from quartermaster.objectstore.store import ObjectStore

BUCKET = "quartermaster"


@pytest.fixture
def store_dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "s3", tmp_path / "credentials"


@pytest.fixture
def seaweedfs(store_dirs: tuple[Path, Path]) -> Iterator[EmbeddedSeaweedFS]:
    server = EmbeddedSeaweedFS(*store_dirs)
    with server:
        yield server


def test_objects_put_are_listed_and_read_back(seaweedfs: EmbeddedSeaweedFS) -> None:
    store = ObjectStore(seaweedfs.access)
    store.create_bucket(BUCKET)
    store.put_bytes(S3Location(BUCKET, "data/a.txt"), b"alpha")
    store.put_bytes(S3Location(BUCKET, "data/b.txt"), b"beta")
    store.put_bytes(S3Location(BUCKET, "other/c.txt"), b"gamma")

    listed = store.list_objects(S3Location(BUCKET, "data/"))

    assert [(info.key, info.size) for info in listed] == [("data/a.txt", 5), ("data/b.txt", 4)]
    assert store.get_bytes(S3Location(BUCKET, "data/b.txt")) == b"beta"


def test_wrong_keys_are_refused(seaweedfs: EmbeddedSeaweedFS) -> None:
    ObjectStore(seaweedfs.access).create_bucket(BUCKET)
    wrong = ObjectStore(
        S3Access(
            endpoint_url=seaweedfs.url,
            access_key_id=seaweedfs.access.access_key_id,
            secret_access_key="not-the-secret-key-of-this-store",
        ),
        max_retries=0,
    )
    with pytest.raises(StoreClientError):
        wrong.put_bytes(S3Location(BUCKET, "x"), b"x")


def test_a_restart_on_the_same_data_dir_keeps_objects_keys_and_endpoint(
    store_dirs: tuple[Path, Path],
) -> None:
    data_dir, credentials = store_dirs
    with EmbeddedSeaweedFS(data_dir, credentials) as first:
        access = first.access
        store = ObjectStore(access)
        store.create_bucket(BUCKET)
        store.put_bytes(S3Location(BUCKET, "kept.bin"), b"\x00kept")

    with EmbeddedSeaweedFS(data_dir, credentials) as again:
        assert again.access == access  # same keys, same port: a shell's exports still work
        assert ObjectStore(again.access).get_bytes(S3Location(BUCKET, "kept.bin")) == b"\x00kept"

    keys = credentials / KEYS_FILE
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o700
    assert access.secret_access_key in keys.read_text()


def test_a_taken_port_on_restart_moves_the_store_and_keeps_its_objects(
    store_dirs: tuple[Path, Path],
) -> None:
    data_dir, credentials = store_dirs
    with EmbeddedSeaweedFS(data_dir, credentials) as first:
        ObjectStore(first.access).create_bucket(BUCKET)
        ObjectStore(first.access).put_bytes(S3Location(BUCKET, "moved.txt"), b"moved")
        old_port = first.port

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", old_port))
        squatter.listen()
        with EmbeddedSeaweedFS(data_dir, credentials) as again:
            assert again.port != old_port
            got = ObjectStore(again.access).get_bytes(S3Location(BUCKET, "moved.txt"))
            assert got == b"moved"


def test_every_port_listens_on_loopback_only(seaweedfs: EmbeddedSeaweedFS) -> None:
    assert seaweedfs.pid is not None and seaweedfs.ports is not None
    listening = _listening(seaweedfs.pid)

    assert {port for _, port in listening} >= set(seaweedfs.ports.all())
    assert {address for address, _ in listening} == {"127.0.0.1"}


def test_stop_ends_the_process_and_removes_its_sockets(store_dirs: tuple[Path, Path]) -> None:
    server = EmbeddedSeaweedFS(*store_dirs).start()
    pid, ports = server.pid, server.ports
    assert pid is not None and ports is not None

    server.stop()

    assert not Path(f"/proc/{pid}").exists()
    assert not [p for port in ports.all() for p in Path("/tmp").glob(f"seaweedfs-*-{port}.sock")]
    server.stop()  # twice is fine


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of each TCP socket process `pid` listens on (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # TCP_LISTEN
                found.add(_address(local, table))
    return found


def _address(local: str, table: str) -> tuple[str, int]:
    hex_address, hex_port = local.split(":")
    raw = bytes.fromhex(hex_address)
    if table == "tcp":
        address = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # four little-endian 32-bit words
        words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
        address = socket.inet_ntop(socket.AF_INET6, words)
    return address, int(hex_port, 16)
