"""Every service, as its own process, exits cleanly on SIGTERM with its dependencies gone.

Compose gives a stopping container 10 s before SIGKILL. Services started by hand once
hung on SIGTERM after NATS went away; this starts all four (`python -m ...`), waits
until each says it is ready (`/readyz`), kills NATS with SIGKILL and stops Postgres,
sends SIGTERM to all at once and checks that each exits with status 0. The exit times
are printed and recorded (`record_property`), not asserted: a loaded CI machine must not
fail the test, the service's own stop deadline (`eventlog.process`) is what bounds them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from quartermaster.embedded.errors import EmbeddedServerError
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.embedded.postgres import EmbeddedPostgres
from quartermaster.testing.servers import started_postgres, unavailable

SERVICES = ("qm_admission", "qm_scheduler", "qm_warmpool", "qm_node_agent")
READY_WITHIN_S = 60.0
EXIT_WITHIN_S = 30.0  # generous: the figures are what the test reports


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environment(
    module: str, nats_url: str, postgres_url: str, data: Path, port: int
) -> dict[str, str]:
    prefix = {
        "qm_admission": "QM_ADMISSION_",
        "qm_scheduler": "QM_SCHEDULER_",
        "qm_warmpool": "QM_WARMPOOL_",
        "qm_node_agent": "QM_NODE_",
    }[module]
    own = {
        "qm_admission": {"INSECURE": "true", "POSTGRES_URL": postgres_url},
        "qm_scheduler": {"INSTANCE_ID": "stop-test"},
        "qm_warmpool": {},
        "qm_node_agent": {
            "HOST_ID": "h1",
            "INSTANCE_TYPE": "ml.g5.xlarge",
            "DATA_DIR": str(data / "agent"),
            "GPU_COUNT": "0",
            "HEARTBEAT_SECONDS": "0.5",
        },
    }[module]
    settings = {"NATS_URL": nats_url, "METRICS_PORT": str(port), **own}
    return {"PATH": os.environ["PATH"], **{prefix + k: v for k, v in settings.items()}}


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as reply:
            return bool(json.loads(reply.read())["status"] == "ready")
    except (OSError, ValueError):
        return False


class Services:
    """The four services as processes; `stop_all()` signals them at once and times each."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}

    def start(self, module: str, env: dict[str, str]) -> None:
        with (self.logs / f"{module}.log").open("wb") as log:
            self.procs[module] = subprocess.Popen(
                [sys.executable, "-m", module], env=env, stderr=log, stdout=log
            )

    def log(self, module: str) -> str:
        return (self.logs / f"{module}.log").read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_WITHIN_S
        waiting = set(self.procs)
        while waiting:
            for module in sorted(waiting):
                proc = self.procs[module]
                assert proc.poll() is None, f"{module} exited early:\n{self.log(module)}"
                if ready(self.ports[module]):
                    waiting.discard(module)
            if time.monotonic() > deadline:
                raise AssertionError(f"not ready within {READY_WITHIN_S} s: {sorted(waiting)}")
            time.sleep(0.2)

    def stop_all(self) -> dict[str, float]:
        """SIGTERM to every service, then each one's seconds until it exited."""
        sent = time.monotonic()
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        exited: dict[str, float] = {}
        while len(exited) < len(self.procs) and time.monotonic() - sent < EXIT_WITHIN_S:
            for module, proc in self.procs.items():
                if module not in exited and proc.poll() is not None:
                    exited[module] = time.monotonic() - sent
            time.sleep(0.01)
        return exited

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    running = Services(tmp_path)
    try:
        yield running
    finally:
        running.kill_all()


@pytest.fixture
def own_postgres() -> Iterator[EmbeddedPostgres]:
    """A Postgres of this test's own: it is stopped mid-test (the session's is shared)."""
    with started_postgres("qm-stop-postgres-") as server:
        yield server


def report(
    record_property: Callable[[str, object], None], case: str, exited: dict[str, float]
) -> None:
    figures = ", ".join(f"{m} {exited[m]:.2f} s" for m in SERVICES if m in exited)
    print(f"\nstop times after SIGTERM ({case}): {figures}")
    for module, seconds in exited.items():
        record_property(f"{case}:{module}", round(seconds, 3))


def check_clean_exits(services: Services, exited: dict[str, float]) -> None:
    for module, proc in services.procs.items():
        log = services.log(module)
        assert module in exited, f"{module} still running {EXIT_WITHIN_S} s after SIGTERM"
        assert proc.returncode == 0, f"{module} exited {proc.returncode}:\n{log[-4000:]}"
        assert "did not stop within" not in log, log[-4000:]


@pytest.mark.timeout(240)
def test_every_service_stops_on_sigterm_with_nats_and_postgres_gone(
    tmp_path: Path,
    services: Services,
    own_postgres: EmbeddedPostgres,
    record_property: Callable[[str, object], None],
) -> None:
    nats = EmbeddedNats(tmp_path / "nats")
    try:
        nats.start()
    except EmbeddedServerError as err:
        unavailable("nats-server", err)
    try:
        postgres_url = own_postgres.url()
        for module in SERVICES:
            services.ports[module] = port = free_port()
            services.start(module, environment(module, nats.url, postgres_url, tmp_path, port))
        services.wait_ready()
        assert nats.pid is not None
        os.kill(nats.pid, signal.SIGKILL)  # gone at once, no goodbye to its clients
        own_postgres.stop()
        time.sleep(1.0)  # the services notice: readers lost, reconnects under way
        exited = services.stop_all()
    finally:
        nats.stop()
    report(record_property, "bus and database down", exited)
    check_clean_exits(services, exited)


@pytest.mark.timeout(120)
def test_every_service_stops_on_sigterm_while_it_still_waits_for_nats(
    tmp_path: Path, services: Services, record_property: Callable[[str, object], None]
) -> None:
    """Started with nothing to connect to (a bus that is not up yet, or never comes)."""
    nowhere = f"nats://127.0.0.1:{free_port()}"
    database = f"postgresql://postgres@127.0.0.1:{free_port()}/none"
    for module in SERVICES:
        services.ports[module] = port = free_port()
        services.start(module, environment(module, nowhere, database, tmp_path, port))
    time.sleep(3.0)  # past interpreter start-up: each is trying to connect
    for module, proc in services.procs.items():
        assert proc.poll() is None, f"{module} exited early:\n{services.log(module)}"
    exited = services.stop_all()
    report(record_property, "never connected", exited)
    check_clean_exits(services, exited)
