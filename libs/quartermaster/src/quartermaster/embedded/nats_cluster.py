"""A JetStream cluster of N `nats-server` processes (tests, benchmarks, many-host runs).

Each node has a fixed client and route port, so a node killed with SIGKILL and
started again on the same store dir rejoins the cluster with its data. By default
all nodes listen on 127.0.0.1 with free ports; `hosts` and `launchers` put node i on
address `hosts[i]` behind a command prefix (say `ip netns exec host-i`), which is how
a node gets a host of its own. Readiness is read from each node's log ("Server is
ready"), which works whichever network the node is in.

JetStream needs a meta leader before streams can be made: clients retry for a few
seconds after `start()` (see `wait_for_jetstream`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from quartermaster.embedded.errors import (
    PermanentEmbeddedServerError,
    TransientEmbeddedServerError,
)
from quartermaster.embedded.managed import ManagedServer
from quartermaster.embedded.nats_server import base_config, find_nats_server

_READY = b"Server is ready"


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """Where one node listens and keeps its data."""

    name: str
    host: str
    client_port: int
    route_port: int
    store_dir: Path
    launcher: tuple[str, ...] = ()  # command prefix, e.g. ("ip", "netns", "exec", "h1")
    monitor_port: int = 0  # the HTTP monitor (/varz, /connz, /routez); 0: none

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.client_port}"

    @property
    def route_url(self) -> str:
        return f"nats://{self.host}:{self.route_port}"

    @property
    def monitor_url(self) -> str:
        """http://host:port of the monitor ("" when the node serves none)."""
        return f"http://{self.host}:{self.monitor_port}" if self.monitor_port else ""

    @property
    def log_file(self) -> Path:
        return self.store_dir / "nats-server.log"


class NatsCluster(ManagedServer):
    """`size` nats-server nodes with JetStream, routed to each other as cluster `name`."""

    def __init__(
        self,
        root: Path | str,
        size: int = 3,
        *,
        name: str = "qm",
        hosts: Sequence[str] | None = None,
        launchers: Sequence[Sequence[str]] | None = None,
        client_port: int | None = None,
        route_port: int | None = None,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
        start_timeout_s: float = 15.0,
        monitor: bool = False,
        route_login: str = "",
    ) -> None:
        """With `hosts`, every node uses `client_port` (default 4222) and `route_port`
        (6222) on its own address; without, free ports on 127.0.0.1 are picked.

        `monitor`: each node serves its HTTP monitor on a free port (`ClusterNode.
        monitor_port`). `route_login` ("user:password"): routes log in with it, and each
        node accepts routes only with it (a config's `cluster.authorization`, which the
        command line's cluster URL would otherwise replace)."""
        if size < 1:
            raise PermanentEmbeddedServerError("a cluster needs at least one node")
        root = Path(root)
        self.name = name
        self.binary = binary
        self.extra_args = tuple(extra_args)
        self.start_timeout_s = start_timeout_s
        self.route_login = route_login
        self.nodes: list[ClusterNode] = []
        for i in range(size):
            host = hosts[i] if hosts else "127.0.0.1"
            self.nodes.append(
                ClusterNode(
                    name=f"{name}-n{i + 1}",
                    host=host,
                    client_port=(client_port or 4222) if hosts else _free_port(),
                    route_port=(route_port or 6222) if hosts else _free_port(),
                    store_dir=root / f"n{i + 1}",
                    launcher=tuple(launchers[i]) if launchers else (),
                    monitor_port=_free_port() if monitor else 0,
                )
            )
        self._processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """All client URLs, comma-separated (what `QM_*_NATS_URL` takes)."""
        return ",".join(self.urls)

    def pid(self, index: int) -> int | None:
        process = self._processes.get(index)
        return process.pid if process is not None and process.poll() is None else None

    def running(self, index: int) -> bool:
        return self.pid(index) is not None

    def index_of(self, node_name: str) -> int:
        """The index of the node called `node_name` (as stream info names leaders)."""
        for index, node in enumerate(self.nodes):
            if node.name == node_name:
                return index
        raise KeyError(node_name)

    def start(self) -> NatsCluster:
        """Start every node that is not running; block until each says it is ready."""
        atexit.register(self.stop)
        try:
            offsets = {i: self._launch(i) for i in range(len(self.nodes)) if not self.running(i)}
            for index, offset in offsets.items():
                self._wait_ready(index, offset)
        except BaseException:
            self.stop()
            raise
        return self

    def start_node(self, index: int) -> None:
        """Start node `index` again (same ports, same store dir): it rejoins with its data."""
        if not self.running(index):
            self._wait_ready(index, self._launch(index))

    def kill(self, index: int) -> None:
        """SIGKILL node `index` (no shutdown: as if its host died) and reap it."""
        process = self._processes.pop(index, None)
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM every node, wait, SIGKILL what is left. Safe to call twice."""
        atexit.unregister(self.stop)
        processes, self._processes = self._processes, {}
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in processes.values():
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _limits(self, node: ClusterNode) -> tuple[str, ...]:
        """Quartermaster's server limits, unless the caller passes a config of its own."""
        if "--config" in self.extra_args:
            return ()
        return ("--config", str(base_config(node.store_dir.parent)))

    def _with_login(self, url: str) -> str:
        return url.replace("nats://", f"nats://{self.route_login}@", 1) if self.route_login else url

    def _launch(self, index: int) -> int:
        node = self.nodes[index]
        node.store_dir.mkdir(parents=True, exist_ok=True)
        offset = node.log_file.stat().st_size if node.log_file.exists() else 0
        routes = ",".join(self._with_login(n.route_url) for n in self.nodes)
        binary = self.binary or find_nats_server()
        monitor = ("--http_port", str(node.monitor_port)) if node.monitor_port else ()
        args = [
            *node.launcher,
            binary,
            "--jetstream",
            "--store_dir",
            str(node.store_dir),
            "--server_name",
            node.name,
            "--addr",
            node.host,
            "--port",
            str(node.client_port),
            "--cluster_name",
            self.name,
            "--cluster",
            self._with_login(node.route_url),
            "--routes",
            routes,
            "--log",
            str(node.log_file),
            *monitor,
            *self._limits(node),
            *self.extra_args,
        ]
        try:
            self._processes[index] = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as err:
            raise PermanentEmbeddedServerError(f"cannot execute {args[0]}: {err}") from err
        return offset

    def _wait_ready(self, index: int, offset: int) -> None:
        node = self.nodes[index]
        process = self._processes[index]
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise TransientEmbeddedServerError(
                    f"{node.name} exited with {process.returncode} while starting: "
                    f"{_tail(node.log_file)}"
                )
            if _READY in _read_from(node.log_file, offset):
                return
            time.sleep(0.02)
        raise TransientEmbeddedServerError(
            f"{node.name} not ready within {self.start_timeout_s}s; log: {node.log_file}"
        )


async def wait_for_jetstream(url: str, timeout_s: float = 20.0) -> None:
    """Return once the cluster at `url` answers JetStream requests (a meta leader is
    elected); raise `TransientEmbeddedServerError` after `timeout_s`."""
    import nats  # a client is needed only here

    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            nc = await nats.connect(url.split(","), connect_timeout=2, max_reconnect_attempts=1)
        except Exception as err:  # not up yet, whatever the client raises
            last = err
            await asyncio.sleep(0.2)
            continue
        try:
            await nc.jetstream(timeout=2).account_info()
            return
        except Exception as err:
            last = err
            await asyncio.sleep(0.2)
        finally:
            with contextlib.suppress(Exception):
                await nc.close()
    raise TransientEmbeddedServerError(f"JetStream at {url} not ready in {timeout_s}s: {last}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


def _tail(path: Path) -> str:
    return "\n".join(_read_from(path, 0).decode(errors="replace").splitlines()[-10:])
