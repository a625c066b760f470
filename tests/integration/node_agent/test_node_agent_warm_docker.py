"""Warm starts on the docker runtime, against a local registry and a real engine.

A cold start pulls the image (a 40 MB random layer on the job-runner image,
pushed to a `docker-registry` of this test session and removed from the
engine), creates the chain's volume, stages the input channel and creates the
container; the warm reuse skips all of that and starts the ready sandbox. When
the pool ends, its sandbox, volume and staged inputs are freed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from node_agent_harness import JOB_RUNNER_IMAGE, Cluster, engine_has, payload

from qm_node_agent import RuntimeKind
from qm_node_agent.contract.spec import Contract, Outputs
from qm_node_agent.launch import LaunchSpec
from qm_node_agent.records import AttemptRecord
from qm_node_agent.runtime import DockerRuntime
from quartermaster import events as ev
from quartermaster.core import JobStatus
from quartermaster.core.training_job import training_job_arn
from quartermaster.testing.registry import (
    LocalRegistry,
    RegistryError,
    build_training_image,
    docker,
    push_only,
)

pytestmark = pytest.mark.docker

IMAGE = "qm-test/warm-train:1"  # the host pulls it from its registry
LAYER_MB = 40
CACHE = '"$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"'


@pytest.fixture(scope="module")
def registry(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry on 127.0.0.1:<free port> holding IMAGE (and the engine not holding it)."""
    try:
        local = LocalRegistry(tmp_path_factory.mktemp("registry")).start()
    except RegistryError as err:
        if os.environ.get("CI"):
            pytest.fail(f"{err} (CI is set, so this fails instead of skipping)")
        pytest.skip(str(err))
    try:
        build_training_image("qm-test/warm-build:1", JOB_RUNNER_IMAGE, LAYER_MB)
        push_only("qm-test/warm-build:1", local.address, IMAGE)
        yield local.address
    finally:
        subprocess.run(["docker", "rmi", "-f", f"{local.address}/{IMAGE}"], capture_output=True)
        local.stop()


def job_payload(script: str, inputs: Path) -> str:
    request = json.loads(payload(script, image=IMAGE))
    request["InputDataConfig"] = [
        {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": f"file://{inputs}"}}}
    ]
    return json.dumps(request)


def pool_available(job_id: str, chain: str) -> ev.WarmPoolAvailable:
    return ev.WarmPoolAvailable(
        at=time.time(),
        job_id=job_id,
        hosts=("h1",),
        expires_at=time.time() + 600,
        chain_id=chain,
        chain_started_at=time.time(),
    )


async def test_a_warm_reuse_skips_pull_volume_and_staging_and_the_pool_end_frees_them(
    cluster: Cluster, registry: str, tmp_path: Path, containers: str
) -> None:
    one, two = f"{containers}-first", f"{containers}-second"
    inputs = tmp_path / "dataset"
    inputs.mkdir()
    (inputs / "part-0").write_text("rows of data\n")
    settings = cluster.settings(
        runtime=RuntimeKind.DOCKER, registry=registry, stop_grace_seconds=2.0
    )
    cache = settings.data_dir / "warmpool-cache" / one
    first = f"cat /opt/ml/input/data/train/part-0 > {CACHE}/seen-first; echo w > {CACHE}/model"
    second = f"cat /opt/ml/input/data/train/part-0 {CACHE}/model > {CACHE}/seen-second"
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run(one, job_payload(first, inputs), keep_alive=600)
        await cluster.until_status(one, JobStatus.SUCCEEDED, timeout=120)
        await cluster.decide(pool_available(one, one))
        await cluster.until(
            "the ready sandbox", lambda: engine_has("container", f"qm-sandbox-h1-{one}")
        )

        await cluster.submit(two, job_payload(second, inputs), keep_alive=600)
        await cluster.dispatch(two, warm_pool=one)
        await cluster.until_status(two, JobStatus.SUCCEEDED, timeout=60)
        cold = cluster.reported(one, ev.JobRunning)[0].start_phases
        warm = cluster.reported(two, ev.JobRunning)[0].start_phases
        assert (cache / "seen-first").read_text() == "rows of data\n"
        assert (cache / "seen-second").read_text() == "rows of data\nw\n"
        assert cluster.job(two).attempts[-1].start_phases == warm

        await cluster.decide(pool_available(two, one))
        await cluster.decide(
            ev.WarmPoolTerminated(
                at=time.time(),
                job_id=two,
                reason=ev.WarmPoolTerminationReason.EXPIRED,
                billable_seconds=1,
            )
        )
        await cluster.until(
            "the pool's sandbox, volume, inputs and cache are freed",
            lambda: (
                not engine_has("container", f"qm-sandbox-h1-{one}")
                and not engine_has("volume", f"qm-vol-h1-{one}")
                and not (settings.data_dir / "warm" / one).exists()
                and not cache.exists()
            ),
        )
    assert cold is not None and warm is not None
    assert not cold.warm and cold.pull_s > 0 and cold.volume_s > 0 and cold.staging_s > 0
    assert cold.container_s > 0
    assert warm.warm and (warm.pull_s, warm.volume_s, warm.staging_s) == (0, 0, 0)
    assert warm.container_s > 0


async def test_a_reuse_dispatched_as_soon_as_the_job_ended_waits_for_the_sandbox(
    cluster: Cluster, registry: str, tmp_path: Path, containers: str
) -> None:
    """The reuse comes before the ended job's container is removed: it still starts warm.

    The log can dispatch the reuse as soon as the success is reported, while
    the agent is still removing the container and making the ready sandbox; a
    launch that raced that work started cold (seen once in CI).
    """
    one, two = f"{containers}-first", f"{containers}-second"
    inputs = tmp_path / "dataset"
    inputs.mkdir()
    (inputs / "part-0").write_text("rows\n")
    settings = cluster.settings(runtime=RuntimeKind.DOCKER, registry=registry)
    read = f"cat /opt/ml/input/data/train/part-0 >> {CACHE}/seen"
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run(one, job_payload(read, inputs), keep_alive=600)
        await cluster.until_status(one, JobStatus.SUCCEEDED, timeout=120)
        await cluster.decide(pool_available(one, one))  # no wait for the ready sandbox
        await cluster.submit(two, job_payload(read, inputs), keep_alive=600)
        await cluster.dispatch(two, warm_pool=one)
        await cluster.until_status(two, JobStatus.SUCCEEDED, timeout=60)
        seen = (settings.data_dir / "warmpool-cache" / one / "seen").read_text()
    warm = cluster.reported(two, ev.JobRunning)[0].start_phases
    assert seen == "rows\nrows\n"
    assert warm is not None and warm.warm
    assert (warm.pull_s, warm.volume_s, warm.staging_s) == (0, 0, 0)


async def test_other_channels_are_staged_again_on_a_warm_reuse(
    cluster: Cluster, registry: str, tmp_path: Path, containers: str
) -> None:
    a, b = f"{containers}-a", f"{containers}-b"
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, text in ((old, "old\n"), (new, "new\n")):
        folder.mkdir()
        (folder / "part-0").write_text(text)
    settings = cluster.settings(
        runtime=RuntimeKind.DOCKER, registry=registry, stop_grace_seconds=2.0
    )
    cache = settings.data_dir / "warmpool-cache" / a
    read = f"cat /opt/ml/input/data/train/part-0 >> {CACHE}/seen"
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run(a, job_payload(read, old), keep_alive=600)
        await cluster.until_status(a, JobStatus.SUCCEEDED, timeout=120)
        await cluster.decide(pool_available(a, a))
        await cluster.until(
            "the ready sandbox", lambda: engine_has("container", f"qm-sandbox-h1-{a}")
        )
        await cluster.submit(b, job_payload(read, new), keep_alive=600)
        await cluster.dispatch(b, warm_pool=a)
        await cluster.until_status(b, JobStatus.SUCCEEDED, timeout=60)
        seen = (cache / "seen").read_text()
    warm = cluster.reported(b, ev.JobRunning)[0].start_phases
    assert seen == "old\nnew\n"
    assert warm.warm and warm.pull_s == 0 and warm.staging_s > 0


async def test_an_image_missing_from_the_registry_is_a_client_error(
    cluster: Cluster, registry: str, containers: str
) -> None:
    settings = cluster.settings(runtime=RuntimeKind.DOCKER, registry=registry)
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run(f"{containers}-missing", payload("true", image="qm-test/no-such-image:1"))
        failed = await cluster.until_reported(f"{containers}-missing", ev.JobFailed, timeout=60)
    assert failed.failure_class is ev.FailureClass.CLIENT_ERROR
    assert f"image not found in {registry}" in failed.reason


def test_the_registry_serves_the_image_to_a_cold_engine(registry: str) -> None:
    ref = f"{registry}/{IMAGE}"
    docker("pull", "-q", ref, timeout_s=300)
    size = int(docker("image", "inspect", "--format", "{{.Size}}", ref).strip())
    docker("rmi", ref)
    assert size > LAYER_MB * 1_000_000


async def _leave_warm(runtime: DockerRuntime, host: str, chain: str, folder: Path) -> None:
    """Run a keep-warm job of `chain` on `runtime` to its end: its ready sandbox and
    volume stay."""
    spec = LaunchSpec(
        job_id=chain,
        attempt=1,
        host=host,
        chain_id=chain,
        image=JOB_RUNNER_IMAGE,
        entrypoint=("true",),
        arguments=(),
        environment={},
        cache_dir=folder / "cache",
        work_dir=folder / "work",
        gpu_indexes=(),
        keep_warm=True,
        contract=Contract(
            training_job_name=f"{chain}-1",
            training_job_arn=training_job_arn(f"{chain}-1"),
            current_host="algo-1",
            hosts=("algo-1",),
            host_ids=(host,),
            instance_type="ml.g5.xlarge",
            hyperparameters={},
            channels=(),
            outputs=Outputs(ml_dir=str(folder / "ml"), training_job_name=f"{chain}-1"),
            hosts_file=str(folder / "hosts"),
        ),
    )
    record = AttemptRecord(
        job_id=chain,
        attempt=1,
        host=host,
        runtime="docker",
        chain_id=chain,
        launched_at=time.time(),
        container=f"qm-{chain}-{host}",
    )
    job = await runtime.launch(spec, record)
    assert (await job.wait()).exit_code == 0
    await job.remove()  # leaves the ready sandbox


async def test_an_agent_frees_only_its_own_hosts_warm_resources(
    docker_engine: None, tmp_path: Path, containers: str
) -> None:
    """Two agents on one engine (as `qm up --runtime docker` runs them): each frees its own."""
    chain = f"{containers}-shared"
    runtimes = {
        host: DockerRuntime(data_dir=tmp_path / host, host_id=host) for host in ("h1", "h2")
    }
    for host, runtime in runtimes.items():
        await _leave_warm(runtime, host, chain, tmp_path / host)
    assert engine_has("container", f"qm-sandbox-h1-{chain}")
    assert engine_has("container", f"qm-sandbox-h2-{chain}")

    await runtimes["h2"].release(set())

    assert engine_has("container", f"qm-sandbox-h1-{chain}")
    assert engine_has("volume", f"qm-vol-h1-{chain}")
    assert not engine_has("container", f"qm-sandbox-h2-{chain}")
    assert not engine_has("volume", f"qm-vol-h2-{chain}")
    await runtimes["h1"].release(set())
    assert not engine_has("container", f"qm-sandbox-h1-{chain}")
    assert not engine_has("volume", f"qm-vol-h1-{chain}")


async def test_an_agent_leaves_another_deployments_host_of_the_same_name_alone(
    docker_engine: None, tmp_path: Path, containers: str
) -> None:
    """Two stacks on one engine, each with a host `h1` (two `qm up`, two test stacks):
    one agent's release frees its own chains only, not the other's warm pools."""
    mine, theirs = f"{containers}-mine", f"{containers}-theirs"
    agent = DockerRuntime(data_dir=tmp_path / "a", host_id="h1")
    other = DockerRuntime(data_dir=tmp_path / "b", host_id="h1")
    await _leave_warm(agent, "h1", mine, tmp_path / "a")
    await _leave_warm(other, "h1", theirs, tmp_path / "b")

    await agent.release(set())

    assert not engine_has("container", f"qm-sandbox-h1-{mine}")
    assert not engine_has("volume", f"qm-vol-h1-{mine}")
    assert engine_has("container", f"qm-sandbox-h1-{theirs}")
    assert engine_has("volume", f"qm-vol-h1-{theirs}")
    await other.release(set())
    assert not engine_has("container", f"qm-sandbox-h1-{theirs}")
    assert not engine_has("volume", f"qm-vol-h1-{theirs}")


async def test_an_older_release_does_not_free_what_a_newer_one_keeps(
    docker_engine: None, tmp_path: Path, containers: str
) -> None:
    """The agent spawns a release on every change of what it keeps, so two can overlap:
    one from before a warm pool was kept (keep nothing) and one after (keep it). The
    older must not free the pool's chain, its folder included: without its folder, no
    later release would free its sandbox and volume."""
    chain = f"{containers}-overlap"
    runtime = DockerRuntime(data_dir=tmp_path / "a", host_id="h1")
    await _leave_warm(runtime, "h1", chain, tmp_path / "a")

    await asyncio.gather(runtime.release(set()), runtime.release({chain}))

    assert engine_has("container", f"qm-sandbox-h1-{chain}")
    assert (tmp_path / "a" / "warm" / chain).is_dir()
    await runtime.release(set())
    assert not engine_has("container", f"qm-sandbox-h1-{chain}")
    assert not engine_has("volume", f"qm-vol-h1-{chain}")
    assert not list(runtime._locks)  # held weakly: none is kept once no task holds it


async def test_a_pool_let_go_during_a_release_is_freed_whole_by_the_next(
    docker_engine: None, tmp_path: Path, containers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release keeps pool K and frees G; while it frees G, K's pool ends too and a
    newer release is spawned (it waits for the first). The first must leave K's folder
    alone: with the folder gone, no release would free K's sandbox and volume."""
    kept, gone = f"{containers}-a-kept", f"{containers}-b-gone"  # K is passed before G is freed
    runtime = DockerRuntime(data_dir=tmp_path / "a", host_id="h1")
    for chain in (kept, gone):
        await _leave_warm(runtime, "h1", chain, tmp_path / "a")
    remove = runtime.remove_container
    newer: list[asyncio.Task[None]] = []

    async def remove_then_let_go(name: str) -> None:
        await remove(name)
        if not newer:  # K's pool ends now: keep nothing
            newer.append(asyncio.create_task(runtime.release(set())))
            await asyncio.sleep(0)

    monkeypatch.setattr(runtime, "remove_container", remove_then_let_go)
    await runtime.release({kept})
    await newer[0]

    for chain in (kept, gone):
        assert not engine_has("container", f"qm-sandbox-h1-{chain}")
        assert not engine_has("volume", f"qm-vol-h1-{chain}")
        assert not (tmp_path / "a" / "warm" / chain).exists()


async def test_a_volume_made_by_a_launch_cut_short_is_freed(
    docker_engine: None, tmp_path: Path, containers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that stops right after making a chain's volume (before the job's
    container): the chain's folder is already there, so the next release frees it."""
    chain = f"{containers}-cut"
    runtime = DockerRuntime(data_dir=tmp_path / "a", host_id="h1")
    make_volume = DockerRuntime._ensure_volume

    async def stop_after(self: DockerRuntime, spec: LaunchSpec, files: object) -> None:
        await make_volume(self, spec, files)  # type: ignore[arg-type]
        raise asyncio.CancelledError  # the agent stops here

    monkeypatch.setattr(DockerRuntime, "_ensure_volume", stop_after)
    with pytest.raises(asyncio.CancelledError):
        await _leave_warm(runtime, "h1", chain, tmp_path / "a")
    assert engine_has("volume", f"qm-vol-h1-{chain}")

    await runtime.release(set())
    assert not engine_has("volume", f"qm-vol-h1-{chain}")
    assert not (tmp_path / "a" / "warm" / chain).exists()
