"""deploy/compose end to end: the built images, up under docker-compose, play the seed scenario
and keep an object in the deployment's S3 store.

One stack for the module, on ports of its own and a project name of its own: a 3-node
NATS cluster, Postgres, the S3 store (SeaweedFS), admission (TLS and bearer tokens), two
schedulers, the warm-pool service and three node agents that run the jobs as containers on
this host's engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import yaml
from scenario import play_seed_scenario

from qm_admission.settings import Settings as AdmissionSettings
from qm_node_agent.settings import NodeSettings
from qm_scheduler.settings import SchedulerSettings
from qm_warmpool.settings import WarmPoolSettings
from quartermaster.auth.local import LocalCredentials
from quartermaster.bus.access import BusSettings
from quartermaster.client import Quartermaster
from quartermaster.objectstore import RoleMap, parse_s3_uri
from quartermaster.objectstore.store import ObjectStore
from quartermaster.testing.container_parts import remove_job_resources

COMPOSE_FILE = Path(__file__).parents[2] / "deploy" / "compose" / "compose.yaml"
JOB_IMAGE = "quartermaster/job-runner:test"
IMAGES = [
    *(f"quartermaster/{name}:local" for name in ("nats", "postgres", "admission")),
    *(f"quartermaster/{name}:local" for name in ("scheduler", "warmpool", "node-agent")),
    "quartermaster/seaweedfs:local",
    JOB_IMAGE,
]
PORTS = [
    *(f"QM_NATS_PORT_{n}" for n in (1, 2, 3)),
    *(f"QM_NATS_CLUSTER_PORT_{n}" for n in (1, 2, 3)),
    *(f"QM_NATS_HTTP_PORT_{n}" for n in (1, 2, 3)),
    "QM_POSTGRES_PORT",
    "QM_GRPC_PORT",
    # Each service's /metrics, /livez and /readyz (its compose health check).
    "QM_ADMISSION_METRICS_PORT",
    "QM_SCHEDULER_1_METRICS_PORT",
    "QM_SCHEDULER_2_METRICS_PORT",
    "QM_WARMPOOL_METRICS_PORT",
    *(f"QM_NODE_{n}_METRICS_PORT" for n in (1, 2, 3)),
]
# SeaweedFS's ports: each also takes its port + 10000 for gRPC.
WEED_PORTS = ["QM_S3_PORT", "QM_S3_MASTER_PORT", "QM_S3_VOLUME_PORT", "QM_S3_FILER_PORT"]
GRPC_OFFSET = 10000
ROLES_FILE = "/etc/quartermaster/s3/roles.json"
SERVICES = 12  # every long-running service of compose.yaml (node-data is one-shot)
UP_TIMEOUT_S = 180.0  # each of `up` and the wait for health (a loaded 2-core machine: ~25 s)


def compose_missing() -> str | None:
    if shutil.which("docker-compose") is None:
        return "no docker-compose (scripts/bootstrap.sh installs it as root)"
    if shutil.which("docker") is None:
        return "no docker CLI"
    for image in IMAGES:
        found = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
        if found.returncode != 0:
            return f"no Docker engine or no image {image} (deploy/images/build-images.sh)"
    return None


def free_ports(count: int, offset: int = 0) -> list[int]:
    """`count` distinct free ports on 127.0.0.1; with `offset`, port + offset is free too."""
    held: list[socket.socket] = []
    found: list[int] = []
    try:
        while len(found) < count:
            first = socket.socket()
            held.append(first)
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            if offset:
                second = socket.socket()
                held.append(second)
                try:
                    second.bind(("127.0.0.1", port + offset))
                except (OSError, OverflowError):
                    continue
            found.append(port)
        return found
    finally:
        for s in held:
            s.close()


class ComposeStack(msgspec.Struct):
    project: str
    env: dict[str, str]
    address: str
    credentials: Path

    def compose(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        command = ["docker-compose", "-f", str(COMPOSE_FILE), "-p", self.project, *args]
        return subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def containers(self) -> list[str]:
        return self.compose("ps", "-q").stdout.split()

    def health(self) -> dict[str, str]:
        """Service name -> health status (or state, for a container without a check)."""
        fmt = (
            '{{index .Config.Labels "com.docker.compose.service"}} '
            "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}"
        )
        ids = self.containers()
        if not ids:
            return {}
        out = subprocess.run(
            ["docker", "inspect", "-f", fmt, *ids], capture_output=True, text=True
        ).stdout
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "40").stdout


def wait_healthy(stack: ComposeStack) -> None:
    deadline = time.monotonic() + UP_TIMEOUT_S
    health: dict[str, str] = {}
    while time.monotonic() < deadline:
        health = stack.health()
        services = {name: state for name, state in health.items() if name != "node-data"}
        if len(services) == SERVICES and all(state == "healthy" for state in services.values()):
            return
        time.sleep(1.0)
    raise AssertionError(f"compose stack not healthy: {health}\n{stack.logs()}")


@pytest.fixture(scope="module")
def compose_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeStack]:
    reason = compose_missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"compose stack cannot run in CI: {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("compose")
    credentials = LocalCredentials.ensure(root / "credentials", dt.datetime.now(dt.UTC))
    for path in (credentials.directory, *credentials.directory.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)  # the containers run as uid 10001
    ports = dict(zip(PORTS, map(str, free_ports(len(PORTS))), strict=True))
    weed = free_ports(len(WEED_PORTS), offset=GRPC_OFFSET)
    ports |= dict(zip(WEED_PORTS, map(str, weed), strict=True))
    project = f"qme2e{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        **ports,
        "QM_POSTGRES_PASSWORD": uuid.uuid4().hex,
        "QM_CREDENTIALS_DIR": str(credentials.directory),
        "QM_DOCKER_GID": str(os.stat("/var/run/docker.sock").st_gid),
        "QM_NODE_DATA_ROOT": str(root / "nodes"),
        "QM_HOST_PREFIX": project,
        "QM_HEARTBEAT_SECONDS": "1",
        "QM_TICK_SECONDS": "1",
    }
    stack = ComposeStack(project, env, f"127.0.0.1:{ports['QM_GRPC_PORT']}", credentials.directory)
    try:
        up = stack.compose("up", "-d", timeout=UP_TIMEOUT_S)
        assert up.returncode == 0, f"docker-compose up failed:\n{up.stderr}\n{stack.logs()}"
        wait_healthy(stack)
        yield stack
    finally:
        stack.compose("down", "-v", "--timeout", "10", timeout=180)
        remove_job_resources(root / "nodes", project)


async def stream_replicas(urls: str) -> tuple[int, int]:
    import nats

    nc = await nats.connect(urls.split(","))
    try:
        info = await nc.jetstream().stream_info("QM")
    finally:
        await nc.close()
    assert info.cluster is not None
    return info.config.num_replicas or 1, 1 + len(info.cluster.replicas or [])


@pytest.mark.docker
@pytest.mark.timeout(600)  # the stack's start counts: up to twice UP_TIMEOUT_S
def test_compose_stack_plays_the_seed_scenario(compose_stack: ComposeStack) -> None:
    client = Quartermaster(
        compose_stack.address, timeout=20, credentials_dir=compose_stack.credentials
    )
    try:
        with client:
            play_seed_scenario(client, image=JOB_IMAGE)
    except AssertionError:
        print(compose_stack.logs())
        raise
    urls = ",".join(f"nats://127.0.0.1:{compose_stack.env[f'QM_NATS_PORT_{n}']}" for n in (1, 2, 3))
    assert asyncio.run(stream_replicas(urls)) == (3, 3)


def test_compose_sets_only_settings_the_services_read() -> None:
    """A misspelt variable is ignored by the service: catch it here, without Docker."""
    node = {f.name for f in dataclasses.fields(NodeSettings)} | set(BusSettings.__struct_fields__)
    known = {
        "QM_ADMISSION_": set(AdmissionSettings.__struct_fields__),
        "QM_SCHEDULER_": set(SchedulerSettings.__struct_fields__),
        "QM_WARMPOOL_": set(WarmPoolSettings.__struct_fields__),
        "QM_NODE_": node,
    }
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    instance_ids = []
    for name, service in services.items():
        for variable, value in (service.get("environment") or {}).items():
            prefix = next((p for p in known if variable.startswith(p)), None)
            if prefix is None:
                continue
            field = variable.removeprefix(prefix).lower()
            assert field in known[prefix], f"{name}: {variable} is not a setting"
            if field == "stream_replicas":
                assert value == "3", name
            if field == "nats_url":
                assert len(value.split(",")) == 3, name
            if variable == "QM_SCHEDULER_INSTANCE_ID":
                instance_ids.append(value)
    assert len(instance_ids) == len(set(instance_ids)) == 2


def compose_exec(stack: ComposeStack, service: str, *command: str) -> str:
    done = stack.compose("exec", "-T", service, *command)
    assert done.returncode == 0, f"{service}: {command} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_compose_store_keeps_objects_for_the_role_map_it_wrote(compose_stack: ComposeStack) -> None:
    """The store's role map names it and its keys; an object written through it reads back,
    and admission and the agents read the same map from the file their settings name."""
    roles = msgspec.json.decode(
        compose_exec(compose_stack, "seaweedfs", "cat", ROLES_FILE), type=RoleMap
    )
    access = roles.default_access
    assert access is not None
    assert access.endpoint_url == f"http://127.0.0.1:{compose_stack.env['QM_S3_PORT']}"
    assert len(access.access_key_id) >= 16 and len(access.secret_access_key) >= 32
    store = ObjectStore(access)
    store.create_bucket("qm-e2e")
    where = parse_s3_uri("s3://qm-e2e/models/run-1/model.tar.gz")
    payload = os.urandom(3 * 1024 * 1024 + 7)
    store.put_bytes(where, payload)
    assert store.get_bytes(where) == payload
    assert [(o.key, o.size) for o in store.list_objects(parse_s3_uri("s3://qm-e2e/models/"))] == [
        ("models/run-1/model.tar.gz", len(payload))
    ]
    read = "import os, sys; from quartermaster.objectstore import RoleMap; "
    read += "print(RoleMap.load(os.environ[sys.argv[1]]).default_access.endpoint_url)"
    for service, variable in [
        ("admission", "QM_ADMISSION_ROLES_FILE"),
        ("node-agent-1", "QM_NODE_ROLES_FILE"),
    ]:
        seen = compose_exec(compose_stack, service, "/opt/qm/bin/python", "-c", read, variable)
        assert seen.strip() == access.endpoint_url, service
    # The keys were made on the first start and kept: a restarted store has the object.
    restarted = compose_stack.compose("restart", "seaweedfs", timeout=120)
    assert restarted.returncode == 0, restarted.stderr
    wait_healthy(compose_stack)
    again = msgspec.json.decode(
        compose_exec(compose_stack, "seaweedfs", "cat", ROLES_FILE), type=RoleMap
    )
    assert again == roles
    assert ObjectStore(access).get_bytes(where) == payload
