"""deploy/compose end to end: the built images, up under docker-compose, play the seed scenario
over TLS with the bootstrap's admin token, refuse NATS clients without a user of their own,
keep an object in the deployment's S3 store, and answer boto3 on the AWS-compatible endpoint
with the bootstrap's access key.

One stack for the module, on ports of its own and a project name of its own: the one-shot
bootstrap (CA, certificates, NATS users, token key), a 3-node NATS cluster (mutual TLS and
a password per service role), Postgres, the S3 store (SeaweedFS), admission (TLS and bearer
tokens), two schedulers, the warm-pool service and three node agents that run the jobs as
containers on this host's engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import shutil
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from scenario import QUEUE, play_seed_scenario

from qm_admission.settings import Settings as AdmissionSettings
from qm_node_agent.settings import NodeSettings
from qm_scheduler.settings import SchedulerSettings
from qm_warmpool.settings import WarmPoolSettings
from quartermaster.auth.access_keys import KEYS_FILE, SEAL_FILE, AccessKeyFile
from quartermaster.bus.access import BusSettings, NatsCredentials
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
    "QM_AWS_PORT",
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
SERVICES = 12  # every long-running service of compose.yaml
ONE_SHOTS = {"prepare", "bootstrap", "stream"}
# Where the bootstrap keeps everything (volume `credentials`), and what this test reads there:
# the client's CA and admin token, and the auditor's NATS login (read-only on the bus).
BOOTSTRAP_OUT = "/var/lib/qm-bootstrap"
BOOTSTRAP_CREDENTIALS = f"{BOOTSTRAP_OUT}/credentials"
CLIENT_FILES = ["ca.pem", "admin.token"]
AWS_KEY_FILES = [KEYS_FILE, SEAL_FILE]  # the AWS access keys, an admin's first
AUDITOR_FILES = ["auditor.password", "nats-auditor.pem", "nats-auditor-key.pem"]
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
        services = {name: state for name, state in health.items() if name not in ONE_SHOTS}
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
    credentials = root / "credentials"
    credentials.mkdir()
    ports = dict(zip(PORTS, map(str, free_ports(len(PORTS))), strict=True))
    weed = free_ports(len(WEED_PORTS), offset=GRPC_OFFSET)
    ports |= dict(zip(WEED_PORTS, map(str, weed), strict=True))
    project = f"qme2e{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        **ports,
        "QM_POSTGRES_PASSWORD": uuid.uuid4().hex,
        "QM_DOCKER_GID": str(os.stat("/var/run/docker.sock").st_gid),
        "QM_NODE_DATA_ROOT": str(root / "nodes"),
        "QM_HOST_PREFIX": project,
        "QM_HEARTBEAT_SECONDS": "1",
        "QM_TICK_SECONDS": "1",
    }
    stack = ComposeStack(project, env, f"127.0.0.1:{ports['QM_GRPC_PORT']}", credentials)
    try:
        up = stack.compose("up", "-d", timeout=UP_TIMEOUT_S)
        assert up.returncode == 0, f"docker-compose up failed:\n{up.stderr}\n{stack.logs()}"
        wait_healthy(stack)
        for name in CLIENT_FILES + AUDITOR_FILES + AWS_KEY_FILES:
            (credentials / name).write_bytes(bootstrap_file(stack, name))
        yield stack
    finally:
        stack.compose("down", "-v", "--timeout", "10", timeout=180)
        remove_job_resources(root / "nodes", project)


def bootstrap_file(stack: ComposeStack, name: str) -> bytes:
    """A file the bootstrap keeps on volume `credentials` (read by a container of it)."""
    command = ["docker-compose", "-f", str(COMPOSE_FILE), "-p", stack.project, "run", "--rm"]
    command += ["--no-deps", "-T", "--entrypoint", "cat", "bootstrap"]
    done = subprocess.run(
        [*command, f"{BOOTSTRAP_CREDENTIALS}/{name}"], env=stack.env, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def nats_urls(stack: ComposeStack) -> list[str]:
    return [f"nats://127.0.0.1:{stack.env[f'QM_NATS_PORT_{n}']}" for n in (1, 2, 3)]


def login(who: NatsCredentials) -> dict[str, Any]:
    """`nats.connect` options of a user: its credentials, TLS, and its own inbox prefix
    (the only one it may subscribe on)."""
    return {**who.connect_options(), "inbox_prefix": who.inbox_prefix() or "_INBOX"}


def auditor(stack: ComposeStack) -> NatsCredentials:
    """The auditor's login: a user of the bus that may read the log and write nothing."""
    return NatsCredentials(
        user="auditor",
        password=(stack.credentials / "auditor.password").read_text().strip(),
        tls_ca=str(stack.credentials / "ca.pem"),
        tls_cert=str(stack.credentials / "nats-auditor.pem"),
        tls_key=str(stack.credentials / "nats-auditor-key.pem"),
    )


async def stream_replicas(urls: list[str], who: NatsCredentials) -> tuple[int, int]:
    import nats

    nc = await nats.connect(urls, **login(who))
    try:
        info = await nc.jetstream().stream_info("QM")
    finally:
        await nc.close()
    assert info.cluster is not None
    return info.config.num_replicas or 1, 1 + len(info.cluster.replicas or [])


async def refused(urls: list[str], **options: object) -> str:
    """Why the cluster turned this connection away ("" if it let it in)."""
    import nats

    try:
        nc = await nats.connect(
            urls, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=5, **options
        )
    except Exception as err:  # nats-py raises several types: the message is what we check
        return f"{type(err).__name__}: {err}"
    await nc.close()
    return ""


async def publish_refused(urls: list[str], who: NatsCredentials) -> tuple[str, bool]:
    """The auditor publishes a request into the log: (the server's error, whether the
    stream's newest request is the one it published)."""
    import nats.errors
    import nats.js.errors

    errors: list[str] = []

    async def on_error(err: Exception) -> None:
        errors.append(str(err))

    marker = uuid.uuid4().hex.encode()
    nc = await nats.connect(urls, error_cb=on_error, **login(who))
    try:
        js = nc.jetstream()
        # No ack comes: the server drops the message (nats-py raises a timeout).
        with pytest.raises((nats.errors.Error, TimeoutError)):
            await js.publish("qm.requests", marker, timeout=3)
        await nc.flush()
        try:
            newest = (await js.get_last_msg("QM", "qm.requests")).data or b""
        except nats.js.errors.NotFoundError:
            newest = b""
    finally:
        await nc.close()
    return " ".join(errors), newest == marker


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
    who = auditor(compose_stack)
    assert asyncio.run(stream_replicas(nats_urls(compose_stack), who)) == (3, 3)


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_compose_nats_refuses_clients_without_a_user_of_their_own(
    compose_stack: ComposeStack,
) -> None:
    """Mutual TLS and one user per role: no certificate, no user, or a user writing outside
    its permissions are each refused, and the log is unchanged."""
    urls = nats_urls(compose_stack)
    who = auditor(compose_stack)
    # No TLS and no user (what every service did before the bootstrap).
    assert asyncio.run(refused(urls))
    # The CA but no client certificate: the TLS handshake fails.
    trusting = ssl.create_default_context(cafile=who.tls_ca)
    assert asyncio.run(refused(urls, tls=trusting))
    # A certificate of the CA but no user: an authorization violation.
    anonymous = NatsCredentials(tls_ca=who.tls_ca, tls_cert=who.tls_cert, tls_key=who.tls_key)
    assert "authorization" in asyncio.run(refused(urls, **anonymous.connect_options())).lower()
    # A wrong password for a real user.
    wrong = msgspec.structs.replace(who, password="not-the-password")
    assert "authorization" in asyncio.run(refused(urls, **wrong.connect_options())).lower()
    # The auditor is in, and may not publish into the log.
    assert asyncio.run(refused(urls, **login(who))) == ""
    error, stored = asyncio.run(publish_refused(urls, who))
    assert "permissions violation" in error.lower()
    assert not stored


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_compose_bootstrap_rerun_keeps_every_key(compose_stack: ComposeStack) -> None:
    """Running the bootstrap again (as every `up` does) replaces nothing: the CA, the admin
    token and the access keys are the same bytes, and the running stack still takes the token."""
    kept = {name: bootstrap_file(compose_stack, name) for name in CLIENT_FILES + AWS_KEY_FILES}
    rerun = compose_stack.compose("run", "--rm", "--no-deps", "-T", "bootstrap", timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    again = {name: bootstrap_file(compose_stack, name) for name in CLIENT_FILES + AWS_KEY_FILES}
    assert again == kept
    client = Quartermaster(
        compose_stack.address, timeout=20, credentials_dir=compose_stack.credentials
    )
    with client:
        assert len(client.list_nodes()) == 3


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
            if field not in known[prefix] and field.endswith("_file"):
                field = field.removesuffix("_file")  # read from that file (envsettings)
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


def batch_client(stack: ComposeStack, access_key_id: str, secret: str) -> Any:
    """boto3's Batch client on the stack's AWS endpoint, trusting the bootstrap's CA."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "batch",
        endpoint_url=f"https://127.0.0.1:{stack.env['QM_AWS_PORT']}",
        region_name="us-east-1",
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret,
        verify=str(stack.credentials / "ca.pem"),
        config=Config(retries={"total_max_attempts": 1}),
    )


def queue_names(batch: Any) -> list[str]:
    return [q["jobQueueName"] for q in batch.describe_job_queues()["jobQueues"]]


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_compose_aws_endpoint_takes_the_bootstrap_access_key(compose_stack: ComposeStack) -> None:
    """boto3 signed with the bootstrap's admin access key, over TLS with its CA, sees the seed
    scenario's queue (played by the first test); a wrong secret is refused; a key issued as
    deploy/README.md says (`qm keys issue` on the bootstrap's volume, then the bootstrap
    again) is taken by the running admission."""
    from botocore.exceptions import ClientError

    keys = AccessKeyFile(compose_stack.credentials)
    (admin,) = keys.records()
    assert QUEUE in queue_names(
        batch_client(compose_stack, admin.access_key_id, keys.secret_of(admin))
    )
    with pytest.raises(ClientError) as refused:
        queue_names(batch_client(compose_stack, admin.access_key_id, "not-the-secret-key"))
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"

    run = ["run", "--rm", "--no-deps", "-T"]
    issue = ["--entrypoint", "/opt/qm/bin/qm", "bootstrap", "keys", "issue"]
    issue += ["--data-dir", BOOTSTRAP_OUT, "--subject", "e2e-auditor", "--role", "auditor"]
    issued = compose_stack.compose(*run, *issue)
    assert issued.returncode == 0, issued.stderr
    exported = dict(
        shlex.split(line.removeprefix("export "))[0].split("=", 1)
        for line in issued.stdout.splitlines()
        if line.startswith("export AWS_")
    )
    rerun = compose_stack.compose(*run, "bootstrap")
    assert rerun.returncode == 0, rerun.stderr
    auditor_key = batch_client(
        compose_stack, exported["AWS_ACCESS_KEY_ID"], exported["AWS_SECRET_ACCESS_KEY"]
    )
    assert QUEUE in queue_names(auditor_key)
