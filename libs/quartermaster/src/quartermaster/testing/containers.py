"""Quartermaster as containers, for integration suites of your own (testcontainers).

    from quartermaster.testing.containers import QuartermasterStack

    with QuartermasterStack() as stack:
        stack.client.create_service_environment("env", {"ml.g5.xlarge": 3})

Secure by default, like `qm up`: TLS gRPC with bearer tokens (a local CA and admin token
in a temp dir) and one NATS user per service and host; `secure=False`: plaintext, an
anonymous bus.

One context manager starts NATS (one node, or a 3-node JetStream cluster), Postgres, an S3
store (SeaweedFS), admission, two schedulers, the warm-pool service and N node agents from
the images that `deploy/images/build-images.sh` builds, and returns once admission serves
and every agent has registered. Admission and the agents read a role map naming the store
(`role_map`); `s3_access` is its endpoint and keys, for `ObjectStore` or boto3. Leaving
it removes every container it started, also when starting failed.
It needs no pytest.

Host networking only (our CI engines run with `--bridge=none`): every container gets free
loopback ports of its own, so stacks run side by side. Testcontainers' reaper (Ryuk) needs
a bridge and a registry pull, so set `TESTCONTAINERS_RYUK_DISABLED=true`; the stack removes
its own containers. See docs/testcontainers.md.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from testcontainers.core.container import DockerContainer

from quartermaster.auth.local import LocalCredentials
from quartermaster.client import Quartermaster, QuartermasterError
from quartermaster.objectstore.access import RoleMap, S3Access
from quartermaster.testing import container_parts
from quartermaster.testing.container_parts import (
    STACK_LABEL,
    StackContainers,
    StackStartError,
    Volume,
    free_ports,
    http_ok,
    log,
    remove_job_resources,
)

__all__ = ["STACK_LABEL", "QuartermasterStack", "StackStartError", "missing_images"]

MOUNTED_CREDENTIALS = "/etc/quartermaster/credentials"  # admission's view of its TLS/token files
MOUNTED_NATS_USERS = "/etc/nats/users"  # the nats-server config with every user, mounted
MOUNTED_ROLES = "/etc/quartermaster/s3"  # admission's and the agents' view of roles.json
ROLES_FILE = "roles.json"
DEFAULT_ROLE_ARN = "arn:aws:iam::000000000000:role/quartermaster"
GRPC_OFFSET = 10000  # SeaweedFS serves gRPC on each of its ports + 10000
NODE_DATA_DIR = "/var/lib/quartermaster"  # the node-agent image's data dir
DOCKER_SOCKET = "/var/run/docker.sock"
RUNTIMES = ("process", "docker")
PARTS = ("nats", "postgres", "seaweedfs", "admission", "scheduler", "warmpool", "node-agent")
IMAGE_PYTHON = "/opt/qm/bin/python"  # the service images' venv
NATS_CONFIG = "nats-server.conf"
# Both run with the admission image's Python, so the NATS users and their permissions
# are those of the code in the images, whatever version of this library runs the test.
# The users (with fresh passwords) and the server config that lets each in:
USERS_SCRIPT = """
import json, os, secrets, sys
from quartermaster.embedded.nats_auth import BusLayout, render_config, service_users
users = service_users(lambda name: secrets.token_urlsafe(32), json.loads(os.environ["QM_HOSTS"]))
json.dump({
    "config": render_config(users, BusLayout()),
    "users": [{"name": u.name, "password": u.password, "role": u.role.value, "host": u.host}
              for u in users],
}, sys.stdout)
"""
# The admin user makes the stream and the scheduler's buckets before any service connects
# (on a bus with users, no service may).
BOOTSTRAP_SCRIPT = """
import asyncio, os
from quartermaster.bus.access import NatsCredentials
from quartermaster.embedded.nats_auth import BusLayout
from quartermaster.eventlog.bootstrap import bootstrap
admin = NatsCredentials(user=os.environ["QM_NATS_USER"], password=os.environ["QM_NATS_PASSWORD"])
url, replicas = os.environ["QM_NATS_URL"], int(os.environ["QM_STREAM_REPLICAS"])
asyncio.run(bootstrap(url, BusLayout(), admin, replicas=replicas))
"""


def missing_images(image_prefix: str = "quartermaster/", image_tag: str = "local") -> list[str]:
    """The stack's images that the engine lacks (all of them when no engine answers):
    what a suite checks to skip with a reason instead of failing."""
    return container_parts.missing_images([f"{image_prefix}{p}:{image_tag}" for p in PARTS])


class QuartermasterStack:
    """The whole stack in containers; `with QuartermasterStack() as stack:` starts and removes it.

    Once entered: `address` (admission's gRPC address), `client` (a connected
    `Quartermaster`), `credentials_dir` (CA and admin token; None when insecure),
    `nats_url` (comma-separated on a cluster), `postgres_url`, `s3_access` (the S3
    store's endpoint and keys) and `role_map` (`role_arn` -> that store, as admission
    and the agents read it), `host_ids`, and `containers` (part name -> testcontainers
    container, e.g. to `logs("scheduler-1")`), and `metrics_urls` (part name ->
    its `/metrics` URL; `/livez` and `/readyz` beside it). `start` returns once every
    service answers 200 on `/readyz` (connected, caught up, leading or standing by,
    heartbeats written and the runtime answering) and admission lists every node
    HEALTHY.
    `extra_env` adds or overrides variables per part kind (`{"scheduler":
    {"QM_SCHEDULER_LEASE_TTL_SECONDS": "3"}}`).
    """

    def __init__(
        self,
        *,
        secure: bool = True,
        nats_users: bool | None = None,
        cluster: bool = False,
        nodes: int = 3,
        schedulers: int = 2,
        instance_type: str = "ml.g5.xlarge",
        gpus_per_node: int = 0,
        runtime: str = "process",
        image_prefix: str = "quartermaster/",
        image_tag: str = "local",
        heartbeat_seconds: float = 1.0,
        tick_seconds: float = 1.0,
        stop_grace_seconds: float = 2.0,
        startup_timeout_s: float = 120.0,
        client_timeout_s: float = 20.0,
        role_arn: str = DEFAULT_ROLE_ARN,
        extra_env: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime={runtime!r}: use one of {', '.join(RUNTIMES)}")
        unknown = sorted(set(extra_env or {}) - set(PARTS))
        if unknown:
            raise ValueError(f"extra_env: unknown parts {unknown}; parts are {', '.join(PARTS)}")
        if nodes < 1 or schedulers < 1:
            raise ValueError("nodes and schedulers: at least 1 each")
        self.secure = secure
        self.nats_users = secure if nats_users is None else nats_users
        self.cluster = cluster
        self.schedulers = schedulers
        self.instance_type = instance_type
        self.gpus_per_node = gpus_per_node
        self.runtime = runtime
        self.image_prefix = image_prefix
        self.image_tag = image_tag
        self.heartbeat_seconds = heartbeat_seconds
        self.tick_seconds = tick_seconds
        self.stop_grace_seconds = stop_grace_seconds
        self.startup_timeout_s = startup_timeout_s
        self.client_timeout_s = client_timeout_s
        self.role_arn = role_arn
        self.extra_env = {part: dict(env) for part, env in (extra_env or {}).items()}
        self.stack_id = f"qm-{secrets.token_hex(4)}"
        self.host_ids = [f"node-{i}" for i in range(1, nodes + 1)]
        self._parts = StackContainers(self.stack_id, startup_timeout_s)
        self.address = ""
        self.nats_url = ""
        self.postgres_url = ""
        self.credentials_dir: Path | None = None
        self.metrics_urls: dict[str, str] = {}  # part name -> http://127.0.0.1:PORT/metrics
        self._role_map: RoleMap | None = None
        self._roles_file: Path | None = None  # the map as written, handed to each image
        self._client: Quartermaster | None = None
        self._nats_logins: dict[tuple[str, str | None], tuple[str, str]] = {}  # role, host
        self._workdir: Path | None = None

    # ---- lifecycle ----------------------------------------------------------
    def __enter__(self) -> QuartermasterStack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def containers(self) -> dict[str, DockerContainer]:
        """Part name (`admission`, `scheduler-1`, `node-2`, ...) -> its container."""
        return self._parts.by_name

    @property
    def client(self) -> Quartermaster:
        if self._client is None:
            raise RuntimeError("the stack is not started")
        return self._client

    @property
    def role_map(self) -> RoleMap:
        """What admission and the agents read: `role_arn` (the default role) -> the store."""
        if self._role_map is None:
            raise RuntimeError("the stack is not started")
        return self._role_map

    @property
    def s3_access(self) -> S3Access:
        """The S3 store's endpoint (http://127.0.0.1:PORT) and keys: `ObjectStore(access)`."""
        access = self.role_map.default_access
        assert access is not None  # the map is made with its default role
        return access

    def start(self) -> QuartermasterStack:
        """Start every part in dependency order; on any failure remove what started, re-raise."""
        self._parts.deadline = time.monotonic() + self.startup_timeout_s
        try:
            self._check_images()
            self._workdir = Path(tempfile.mkdtemp(prefix=f"{self.stack_id}-"))
            self._start_nats()
            self._start_postgres()
            self._start_object_store()
            self._start_admission()
            self._start_log_services()
            self._client = self._connect()
            self._wait_for_nodes()
        except BaseException:
            self.stop()
            raise
        log.info(
            "stack %s up: grpc %s, nats %s, s3 %s",
            self.stack_id,
            self.address,
            self.nats_url,
            self.s3_access.endpoint_url,
        )
        return self

    def stop(self) -> None:
        """Remove every container (the last started first) and the temp dir. Safe twice."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self._parts.remove_all()
        if self._workdir is not None:
            if self.runtime == "docker":
                remove_job_resources(self._workdir, self.stack_id)
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        self._role_map = None
        self._roles_file = None

    def restarts(self) -> dict[str, int]:
        """How often each container was restarted after exiting with an error."""
        return self._parts.restarts()

    def logs(self, name: str, tail: int = 200) -> str:
        """The last `tail` lines of part `name` (`admission`, `scheduler-1`, `node-2`, ...)."""
        return self._parts.logs(name, tail)

    # ---- parts --------------------------------------------------------------
    def _image(self, part: str) -> str:
        return f"{self.image_prefix}{part}:{self.image_tag}"

    def _check_images(self) -> None:
        missing = missing_images(self.image_prefix, self.image_tag)
        if missing:
            raise StackStartError(
                f"no Docker engine, or images not found: {', '.join(missing)} (build "
                "them with deploy/images/build-images.sh; nothing is pulled)"
            )

    def _run(self, name: str, part: str, env: dict[str, str], **options: Any) -> None:
        """Start part `name` from the image of `part`, with `extra_env` of `part` on top."""
        env = {**env, **self.extra_env.get(part, {})}
        self._parts.run(name, self._image(part), env, **options)

    def _bus_env(self, prefix: str, role: str, host: str | None = None) -> dict[str, str]:
        """Where the log is and, on a bus with users, who this part is there."""
        replicas = "3" if self.cluster else "1"
        env = {f"{prefix}NATS_URL": self.nats_url, f"{prefix}STREAM_REPLICAS": replicas}
        if self._nats_logins:
            user, password = self._nats_logins[role, host]
            env[f"{prefix}NATS_USER"] = user
            env[f"{prefix}NATS_PASSWORD"] = password
        return env

    def _start_nats(self) -> None:
        """One node, or three routed as one JetStream cluster; ready once /healthz says so
        (on a cluster: a meta leader is elected)."""
        size = 3 if self.cluster else 1
        ports = free_ports(3 * size)
        client_ports, route_ports, http_ports = (
            ports[:size],
            ports[size : 2 * size],
            ports[2 * size :],
        )
        routes = ",".join(f"nats://127.0.0.1:{p}" for p in route_ports)
        users, volumes, group_add = self._nats_user_config()
        for i in range(size):
            command = [
                "--jetstream",
                "--store_dir",
                "/data",
                "--server_name",
                f"{self.stack_id}-nats-{i + 1}",
                "--addr",
                "127.0.0.1",
                "--port",
                str(client_ports[i]),
                "--http_port",
                str(http_ports[i]),
            ]
            if self.cluster:
                command += ["--cluster_name", self.stack_id, "--routes", routes]
                command += ["--cluster", f"nats://127.0.0.1:{route_ports[i]}"]
            self._run(
                f"nats-{i + 1}",
                "nats",
                {},
                command=users + command,
                volumes=volumes,
                group_add=group_add,
            )
        self.nats_url = ",".join(f"nats://127.0.0.1:{p}" for p in client_ports)
        for i, port in enumerate(http_ports):
            healthy = functools.partial(http_ok, f"http://127.0.0.1:{port}/healthz")
            self._parts.wait(f"nats-{i + 1}", "healthy", healthy)
        if self._nats_logins:
            self._bootstrap_bus()

    def _nats_user_config(self) -> tuple[list[str], list[Volume], list[str]]:
        """With NATS users: one per service and per host (`embedded.nats_auth`), in a
        server config mounted into each node; the arguments, volumes and groups for it."""
        if not self.nats_users:
            return [], [], []
        assert self._workdir is not None
        rendered = json.loads(
            self._parts.run_once(
                "nats-users",
                self._image("admission"),
                {"QM_HOSTS": json.dumps(self.host_ids)},
                command=["-c", USERS_SCRIPT],
                entrypoint=IMAGE_PYTHON,
            )
        )
        self._nats_logins = {
            (u["role"], u["host"]): (u["name"], u["password"]) for u in rendered["users"]
        }
        private = self._workdir / "nats-users"
        private.mkdir(mode=0o700)
        config = private / NATS_CONFIG
        with os.fdopen(os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(rendered["config"])  # it holds every password
        mounted = self._workdir / "nats-config"
        group_add = self._parts.hand_over(self._image("nats"), mounted, [config])
        volume = (str(mounted), MOUNTED_NATS_USERS, "ro")
        return ["-c", f"{MOUNTED_NATS_USERS}/{NATS_CONFIG}"], [volume], group_add

    def _bootstrap_bus(self) -> None:
        """The admin user makes the stream and buckets (a one-shot admission container)."""
        self._parts.run_once(
            "bus-bootstrap",
            self._image("admission"),
            self._bus_env("QM_", "admin"),
            command=["-c", BOOTSTRAP_SCRIPT],
            entrypoint=IMAGE_PYTHON,
        )

    def _start_postgres(self) -> None:
        password = secrets.token_hex(16)
        port = free_ports(1)[0]
        env = {
            "POSTGRES_PASSWORD": password,
            "POSTGRES_DB": "quartermaster",
            "PGPORT": str(port),
            "POSTGRES_LISTEN_ADDRESSES": "127.0.0.1",
        }
        self._run("postgres", "postgres", env)
        self.postgres_url = f"postgresql://postgres:{password}@127.0.0.1:{port}/quartermaster"
        self._parts.wait_log("postgres", "database system is ready to accept connections")

    def _start_object_store(self) -> None:
        """SeaweedFS with keys made here (passed in its environment); the role map naming
        it is written here too, for admission and the agents. Ready once the S3 gateway
        answers `/healthz`."""
        assert self._workdir is not None
        s3, master, volume, filer = free_ports(4, offset=GRPC_OFFSET)
        access = S3Access(
            endpoint_url=f"http://127.0.0.1:{s3}",
            access_key_id=f"QM{secrets.token_hex(10).upper()}",
            secret_access_key=secrets.token_hex(32),
        )
        env = {
            "S3_HOST": "127.0.0.1",
            "S3_PORT": str(s3),
            "S3_MASTER_PORT": str(master),
            "S3_VOLUME_PORT": str(volume),
            "S3_FILER_PORT": str(filer),
            "S3_ACCESS_KEY_ID": access.access_key_id,
            "S3_SECRET_ACCESS_KEY": access.secret_access_key,
            "S3_ROLE_ARN": self.role_arn,
            "S3_REGION": access.region,
        }
        self._run("seaweedfs", "seaweedfs", env)
        private = self._workdir / "object-store"
        private.mkdir(mode=0o700)
        self._role_map = RoleMap(roles={self.role_arn: access}, default_role=self.role_arn)
        self._roles_file = private / ROLES_FILE
        self._role_map.save(self._roles_file)  # 0600: it holds the keys
        healthy = functools.partial(http_ok, f"{access.endpoint_url}/healthz")
        self._parts.wait("seaweedfs", "serving S3", healthy)

    def _roles_volume(self, part: str) -> tuple[Volume, list[str]]:
        """The role map handed to `part`'s image user, and the groups its container joins."""
        assert self._workdir is not None and self._roles_file is not None
        mounted = self._workdir / f"{part}-roles"
        group_add = self._parts.hand_over(self._image(part), mounted, [self._roles_file])
        return (str(mounted), MOUNTED_ROLES, "ro"), group_add

    def _start_admission(self) -> None:
        port = free_ports(1)[0]
        env = {
            **self._bus_env("QM_ADMISSION_", "admission"),
            "QM_ADMISSION_POSTGRES_URL": self.postgres_url,
            "QM_ADMISSION_GRPC_HOST": "127.0.0.1",
            "QM_ADMISSION_GRPC_PORT": str(port),
            "QM_ADMISSION_SHUTDOWN_GRACE_SECONDS": "1",
            "QM_ADMISSION_ROLES_FILE": f"{MOUNTED_ROLES}/{ROLES_FILE}",
            **self._metrics_env("admission", "QM_ADMISSION_"),
        }
        roles, group_add = self._roles_volume("admission")
        volumes: list[Volume] = [roles]
        if self.secure:
            mounted, more_groups = self._admission_credentials()
            volumes.append((str(mounted), MOUNTED_CREDENTIALS, "ro"))
            group_add = sorted({*group_add, *more_groups})
            env |= {
                "QM_ADMISSION_TOKEN_PUBLIC_KEY_FILE": f"{MOUNTED_CREDENTIALS}/token-verify.pem",
                "QM_ADMISSION_TLS_CERT_FILE": f"{MOUNTED_CREDENTIALS}/server.pem",
                "QM_ADMISSION_TLS_KEY_FILE": f"{MOUNTED_CREDENTIALS}/server-key.pem",
                "QM_PROBE_CA_FILE": f"{MOUNTED_CREDENTIALS}/ca.pem",  # for `qm-probe grpc`
            }
        else:
            env["QM_ADMISSION_INSECURE"] = "true"
        self._run("admission", "admission", env, volumes=volumes, group_add=group_add)
        self.address = f"127.0.0.1:{port}"
        self._parts.wait_log("admission", "admission serving")

    def _admission_credentials(self) -> tuple[Path, list[str]]:
        """Make the local CA, server certificate and token keys; hand admission a copy of
        what it needs (and the groups its container joins to read it)."""
        assert self._workdir is not None
        creds = LocalCredentials.ensure(self._workdir / "credentials", dt.datetime.now(dt.UTC))
        self.credentials_dir = creds.directory
        files = (creds.verify_key, creds.server_cert, creds.server_key, creds.ca)
        mounted = self._workdir / "admission-credentials"
        return mounted, self._parts.hand_over(self._image("admission"), mounted, files)

    def _start_log_services(self) -> None:
        """Schedulers, the warm-pool service and the agents start together (the stream
        exists: admission made it); each is waited for once all are started."""
        probes: list[tuple[str, str]] = []
        for i in range(1, self.schedulers + 1):
            name = f"scheduler-{i}"
            env = {
                **self._bus_env("QM_SCHEDULER_", "scheduler"),
                "QM_SCHEDULER_INSTANCE_ID": name,
                **self._metrics_env(name, "QM_SCHEDULER_"),
            }
            self._run(name, "scheduler", env, restart=True)
            probes.append((name, "QM_SCHEDULER_METRICS_PORT"))
        env = {
            **self._bus_env("QM_WARMPOOL_", "warmpool"),
            "QM_WARMPOOL_TICK_SECONDS": str(self.tick_seconds),
            **self._metrics_env("warmpool", "QM_WARMPOOL_"),
        }
        self._run("warmpool", "warmpool", env, restart=True)
        probes.append(("warmpool", "QM_WARMPOOL_METRICS_PORT"))
        roles = self._roles_volume("node-agent")
        for host in self.host_ids:
            self._start_agent(host, roles)
            probes.append((host, "QM_NODE_METRICS_PORT"))
        probes.append(("admission", "QM_ADMISSION_METRICS_PORT"))  # its projection caught up
        for name, variable in probes:
            self._wait_ready(name, variable)

    def _metrics_env(self, name: str, prefix: str) -> dict[str, str]:
        """A port of its own for part `name`'s /metrics, /livez and /readyz."""
        port = free_ports(1)[0]
        self.metrics_urls[name] = f"http://127.0.0.1:{port}/metrics"
        return {f"{prefix}METRICS_PORT": str(port)}

    def _wait_ready(self, name: str, port_variable: str) -> None:
        """Until part `name` answers 200 on /readyz (asked inside its container, as compose's
        health check asks)."""
        command = ["qm-probe", "http", port_variable, "/readyz"]
        self._parts.wait(
            name, "ready (/readyz)", functools.partial(self._parts.exec_ok, name, command)
        )

    def _start_agent(self, host: str, roles: tuple[Volume, list[str]]) -> None:
        env = {
            **self._bus_env("QM_NODE_", "node", host),
            "QM_NODE_HOST_ID": host,
            "QM_NODE_INSTANCE_TYPE": self.instance_type,
            "QM_NODE_GPU_COUNT": str(self.gpus_per_node),
            "QM_NODE_RUNTIME": self.runtime,
            "QM_NODE_DATA_DIR": NODE_DATA_DIR,
            "QM_NODE_HEARTBEAT_SECONDS": str(self.heartbeat_seconds),
            "QM_NODE_STOP_GRACE_SECONDS": str(self.stop_grace_seconds),
            "QM_NODE_ROLES_FILE": f"{MOUNTED_ROLES}/{ROLES_FILE}",
            **self._metrics_env(host, "QM_NODE_"),
        }
        volumes: list[Volume] = [roles[0]]
        group_add: list[str] = list(roles[1])
        if self.runtime == "docker":
            # Job caches are bind-mounted by path, so the data dir has the same path inside.
            assert self._workdir is not None
            data_dir = self._workdir / "nodes" / host
            data_dir.mkdir(parents=True)
            data_dir.chmod(0o777)  # the agent's uid owns nothing here; the dir is temporary
            env["QM_NODE_DATA_DIR"] = str(data_dir)
            volumes += [(DOCKER_SOCKET, DOCKER_SOCKET, "rw"), (str(data_dir), str(data_dir), "rw")]
            group_add.append(str(os.stat(DOCKER_SOCKET).st_gid))
        self._run(host, "node-agent", env, volumes=volumes, group_add=group_add, restart=True)

    def _connect(self) -> Quartermaster:
        if self.credentials_dir is None:
            return Quartermaster(self.address, self.client_timeout_s, insecure=True)
        return Quartermaster(
            self.address, self.client_timeout_s, credentials_dir=self.credentials_dir
        )

    def _wait_for_nodes(self) -> None:
        """Every agent's host is HEALTHY in admission's read model (the client's view)."""
        from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

        def all_healthy() -> bool:
            try:
                nodes = self.client.list_nodes()
            except QuartermasterError:  # not serving yet
                return False
            healthy = {n.host_id for n in nodes if n.state == pb.NODE_STATE_HEALTHY}
            return healthy >= set(self.host_ids)

        self._parts.wait("admission", "listing every node healthy", all_healthy)
