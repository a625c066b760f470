"""The seed scenario on the stack as containers (`quartermaster.testing.containers`), and
objects kept in its S3 store.

The images are those of deploy/images/build-images.sh (and build-test-images.sh for
the job image of the docker runtime); without them, or without an engine, the tests
skip with the reason, and fail instead when `CI` is set.
"""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
import urllib.request

import grpc
import msgspec
import pytest
from scenario import LONG, UNIT, play_seed_scenario, setup_queue, status, until

from quartermaster.client import Quartermaster, QuartermasterError, training_job
from quartermaster.objectstore import RoleMap, StoreClientError, parse_s3_uri
from quartermaster.objectstore.store import ObjectStore
from quartermaster.testing.container_parts import missing_images as missing
from quartermaster.testing.containers import (
    STACK_LABEL,
    QuartermasterStack,
    StackStartError,
    missing_images,
)

# Ryuk (testcontainers' reaper) needs a bridge network and a registry pull; the stack
# removes its own containers. Read when the first container starts, so this is in time.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

pytestmark = pytest.mark.docker
JOB_IMAGE = "quartermaster/job-runner:test"
JOB_LABEL = "org.quartermaster.job-id"


def need(images: list[str], build: str) -> None:
    if images:
        reason = f"no Docker engine or no images {images} ({build})"
        if os.environ.get("CI"):
            pytest.fail(f"containers stack cannot run in CI: {reason}")
        pytest.skip(reason)


@pytest.fixture(autouse=True)
def stack_images() -> None:
    need(missing_images(), "deploy/images/build-images.sh")


def labelled(label: str) -> list[str]:
    """Names of the containers (running or not) that carry `label` (`key=value`)."""
    import docker

    engine = docker.from_env()
    try:
        return [c.name for c in engine.containers.list(all=True, filters={"label": label})]
    finally:
        engine.close()


def containers_of(stack: QuartermasterStack) -> list[str]:
    return labelled(f"{STACK_LABEL}={stack.stack_id}")


def refused(client: Quartermaster) -> grpc.StatusCode:
    with client, pytest.raises(QuartermasterError) as caught:
        client.list_nodes()
    return caught.value.code


async def nats_lets_in_anonymous(urls: str) -> bool:
    import nats

    try:
        nc = await nats.connect(urls.split(","), allow_reconnect=False)
    except nats.errors.Error as err:
        assert "Authorization Violation" in str(err)
        return False
    await nc.close()
    return True


async def stream_replicas(urls: str) -> int:
    import nats

    nc = await nats.connect(urls.split(","))
    try:
        info = await nc.jetstream().stream_info("QM")
    finally:
        await nc.close()
    return info.config.num_replicas or 1


def test_seed_scenario_on_a_secured_stack_of_containers() -> None:
    stack = QuartermasterStack()
    with stack:
        assert len(containers_of(stack)) == 1 + 1 + 1 + 1 + 2 + 1 + 3
        # Started means ready: every service answers /readyz beside its /metrics.
        parts = {"admission", "scheduler-1", "scheduler-2", "warmpool", *stack.host_ids}
        assert set(stack.metrics_urls) == parts
        for name, url in stack.metrics_urls.items():
            with urllib.request.urlopen(url.replace("/metrics", "/readyz"), timeout=5) as reply:
                assert reply.status == 200, name
        assert stack.credentials_dir is not None
        ca = stack.credentials_dir / "ca.pem"
        forged = Quartermaster(stack.address, 5, token="forged", ca_file=ca)
        assert refused(forged) is grpc.StatusCode.UNAUTHENTICATED
        plaintext = Quartermaster(stack.address, 5, insecure=True)
        assert refused(plaintext) is grpc.StatusCode.UNAVAILABLE
        assert not asyncio.run(nats_lets_in_anonymous(stack.nats_url))
        try:
            play_seed_scenario(stack.client)
        except AssertionError:
            for name in ("admission", "scheduler-1", "scheduler-2", *stack.host_ids):
                print(f"--- {name}\n{stack.logs(name)}")
            raise
    assert containers_of(stack) == []


def exec_python(stack: QuartermasterStack, name: str, code: str) -> str:
    """Run `code` with the service image's Python inside part `name`; its stdout."""
    done = stack.containers[name].exec(["/opt/qm/bin/python", "-c", code])
    output = done.output.decode(errors="replace")
    assert done.exit_code == 0, f"{name}: {output}"
    return output


def test_the_stack_s_store_keeps_objects_and_its_role_map_reaches_the_services() -> None:
    stack = QuartermasterStack(nodes=1, schedulers=1, secure=False)
    with stack:
        access = stack.s3_access
        assert access.endpoint_url.startswith("http://127.0.0.1:")
        assert stack.role_map.default_role == stack.role_arn
        assert stack.role_map.access(stack.role_arn) == access
        store = ObjectStore(access)
        store.create_bucket("qm-containers")
        where = parse_s3_uri("s3://qm-containers/data/train/part-0000.bin")
        payload = os.urandom(2 * 1024 * 1024 + 3)
        store.put_bytes(where, payload)
        assert store.get_bytes(where) == payload
        listed = store.list_objects(parse_s3_uri("s3://qm-containers/data/"))
        assert [(o.key, o.size) for o in listed] == [("data/train/part-0000.bin", len(payload))]
        # Other keys are refused by the store: the keys in the map are its only identity.
        forged = ObjectStore(msgspec.structs.replace(access, secret_access_key="0" * 64))
        with pytest.raises(StoreClientError):
            forged.get_bytes(where)
        read = "import os, msgspec; from quartermaster.objectstore import RoleMap; "
        read += "print(msgspec.json.encode(RoleMap.load(os.environ[{!r}])).decode())"
        for name, variable in [
            ("admission", "QM_ADMISSION_ROLES_FILE"),
            ("node-1", "QM_NODE_ROLES_FILE"),
        ]:
            seen = exec_python(stack, name, read.format(variable))
            assert msgspec.json.decode(seen.strip(), type=RoleMap) == stack.role_map, name
    assert containers_of(stack) == []


def test_seed_scenario_on_a_nats_cluster_insecure() -> None:
    stack = QuartermasterStack(cluster=True, secure=False)
    with stack:
        assert stack.credentials_dir is None
        assert len(stack.nats_url.split(",")) == 3
        assert asyncio.run(nats_lets_in_anonymous(stack.nats_url))
        play_seed_scenario(stack.client)
        assert asyncio.run(stream_replicas(stack.nats_url)) == 3
    assert containers_of(stack) == []


def test_docker_runtime_jobs_are_containers_removed_with_the_stack() -> None:
    need(missing([JOB_IMAGE]), "deploy/images/build-test-images.sh")
    stack = QuartermasterStack(nodes=1, runtime="docker")
    with stack:
        c = stack.client
        queue = setup_queue(c, 1, [("A", 1, "RESERVE", None, False)])
        job = training_job(image=JOB_IMAGE, command=["sh", "-c", "exit 3"], instance_type=UNIT)
        failed = queue.submit(job, job_name="exits-3", quota_share_name="A")
        assert failed.wait(timeout=60)["attempts"][-1]["exitCode"] == 3
        job = training_job(image=JOB_IMAGE, command=["sh", "-c", LONG], instance_type=UNIT)
        running = queue.submit(job, job_name="long", quota_share_name="A")
        until("long runs", lambda: status(c, running.job_id) == "RUNNING")
        until("its container runs", lambda: bool(labelled(f"{JOB_LABEL}={running.job_id}")))
    assert labelled(f"{JOB_LABEL}={running.job_id}") == []
    assert containers_of(stack) == []


def test_a_part_that_cannot_start_is_reported_and_nothing_is_left() -> None:
    stack = QuartermasterStack(
        nodes=1, extra_env={"admission": {"QM_ADMISSION_GRPC_PORT": "not-a-port"}}
    )
    with pytest.raises(StackStartError, match=r"(?s)admission exited \(2\).*grpc_port"), stack:
        pytest.fail("the stack must not start")
    assert containers_of(stack) == []


def leader(stack: QuartermasterStack) -> str | None:
    """The running scheduler whose log says it leads a queue (and not that it stopped)."""
    for name in ("scheduler-1", "scheduler-2"):
        container = stack.containers[name].get_wrapped_container()
        container.reload()
        if container.status != "running":
            continue
        lines = stack.logs(name).splitlines()
        leads = [i for i, line in enumerate(lines) if " leading " in line]
        lost = [i for i, line in enumerate(lines) if "no longer leading" in line]
        if leads and (not lost or leads[-1] > lost[-1]):
            return name
    return None


def test_the_standby_scheduler_takes_over_when_the_leader_is_killed() -> None:
    stack = QuartermasterStack(nodes=1, secure=False)
    with stack:
        c = stack.client
        queue = setup_queue(c, 1, [("A", 1, "RESERVE", None, False)])
        job = training_job(command=["sh", "-c", "exit 0"], instance_type=UNIT)
        first = queue.submit(job, job_name="first", quota_share_name="A")
        until("first succeeded", lambda: status(c, first.job_id) == "SUCCEEDED")
        first_leader = leader(stack)
        assert first_leader is not None
        stack.containers[first_leader].get_wrapped_container().kill()
        second = queue.submit(job, job_name="second", quota_share_name="A")
        until("second succeeded", lambda: status(c, second.job_id) == "SUCCEEDED")
        assert leader(stack) not in (None, first_leader)
        killed = stack.containers[first_leader].get_wrapped_container()
        killed.reload()
        assert killed.status == "exited", "a killed scheduler is not restarted by its policy"


def test_a_docker_job_reads_its_channel_from_the_store_and_its_model_lands_there() -> None:
    """The training-job contract against the stack's own store: the agent stages the input
    channel with the role map's keys, and uploads /opt/ml/model as model.tar.gz."""
    need(missing([JOB_IMAGE]), "deploy/images/build-test-images.sh")
    stack = QuartermasterStack(nodes=1, schedulers=1, secure=False, runtime="docker")
    with stack:
        store = ObjectStore(stack.s3_access)
        store.create_bucket("qm-jobs")
        data = os.urandom(64).hex().encode()
        store.put_bytes(parse_s3_uri("s3://qm-jobs/input/train/data.txt"), data)
        queue = setup_queue(stack.client, 1, [("A", 1, "RESERVE", None, False)])
        script = "cp /opt/ml/input/data/train/data.txt /opt/ml/model/model.txt"
        job = training_job(image=JOB_IMAGE, command=["sh", "-c", script], instance_type=UNIT)
        job["InputDataConfig"] = [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": "s3://qm-jobs/input/train/",
                    }
                },
            }
        ]
        job["OutputDataConfig"] = {"S3OutputPath": "s3://qm-jobs/output"}
        submitted = queue.submit(job, job_name="staged", quota_share_name="A")
        try:
            described = submitted.wait(timeout=90)
            assert described["status"] == "SUCCEEDED", described
        except AssertionError:
            print(stack.logs("node-1"))
            raise
        models = [
            o.key
            for o in store.list_objects(parse_s3_uri("s3://qm-jobs/output/"))
            if o.key.endswith("/output/model.tar.gz")
        ]
        assert len(models) == 1, models
        archive = store.get_bytes(parse_s3_uri(f"s3://qm-jobs/{models[0]}"))
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            member = tar.extractfile("model.txt") or tar.extractfile("./model.txt")
            assert member is not None and member.read() == data
