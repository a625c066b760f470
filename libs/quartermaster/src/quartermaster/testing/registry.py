"""A local image registry for tests and benchmarks: Debian's `docker-registry` on 127.0.0.1.

`LocalRegistry(root).start()` serves a registry of its own (filesystem storage
under `root`) on a free port; the Docker engine pushes to and pulls from
`127.0.0.1:<port>/...` without extra configuration. `build_training_image`
makes an image of a few hundred MB from a local base plus one layer of random
bytes (random so that compression cannot shrink what a pull moves), and
`push_only` leaves it in the registry alone, so the next pull is a real cold pull.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

REGISTRY_BINARY = "docker-registry"
START_TIMEOUT_S = 20.0


class RegistryError(RuntimeError):
    """The registry could not start, or an image could not be built or pushed."""


class LocalRegistry:
    def __init__(self, root: Path, binary: str = REGISTRY_BINARY) -> None:
        self.root = root
        self.binary = binary
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LocalRegistry:
        path = shutil.which(self.binary)
        if path is None:
            raise RegistryError(f"{self.binary} not found (apt-get install docker-registry)")
        self.port = _free_port()
        storage = self.root / "storage"
        storage.mkdir(parents=True, exist_ok=True)
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.address}\n"
        )
        log = open(self.root / "registry.log", "ab")  # noqa: SIM115 (the process keeps it)
        self._proc = subprocess.Popen([path, "serve", str(config)], stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RegistryError(f"{self.binary} exited {self._proc.returncode}: see {log.name}")
            try:
                with urllib.request.urlopen(f"http://{self.address}/v2/", timeout=1) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RegistryError(f"{self.binary} did not answer on {self.address}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> LocalRegistry:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def build_training_image(tag: str, base: str, layer_mb: int) -> None:
    """`base` plus a layer of `layer_mb` random MB, tagged `tag` (built offline)."""
    with tempfile.TemporaryDirectory() as context:
        Path(context, "Dockerfile").write_text(
            f"FROM {base}\n"
            f"RUN mkdir -p /opt && dd if=/dev/urandom of=/opt/weights.bin bs=1048576"
            f" count={layer_mb} 2>/dev/null\n"
        )
        docker("build", "-q", "-t", tag, context, timeout_s=600)


def push_only(local_tag: str, registry: str, name: str) -> str:
    """Push `local_tag` as `registry/name` and remove both tags from the engine."""
    ref = f"{registry}/{name}"
    docker("tag", local_tag, ref)
    docker("push", "-q", ref, timeout_s=900)
    docker("rmi", ref, local_tag)
    return ref


def docker(*args: str, timeout_s: float = 120.0) -> str:
    try:
        done = subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RegistryError(f"docker {args[0]}: {err}") from err
    if done.returncode != 0:
        raise RegistryError(f"docker {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return done.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
