"""The node agent with the docker runtime: the key cases with `quartermaster/job-runner:test`.

Needs a running engine (deploy/docker/ensure-engine.sh) and the image
(deploy/images/build-test-images.sh); skipped without them, failed when CI is set.
The job writes what the test checks into its warm pool cache, the one host
directory a container sees (jobs keep their hosts warm so it stays).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from typing import Any

import pytest
from node_agent_harness import Cluster, payload, wait_for_file

from qm_node_agent import NodeSettings, RuntimeKind
from qm_node_agent.attempt import LOST_REASON
from qm_node_agent.runtime.docker import DockerJob
from quartermaster import events as ev
from quartermaster.core import JobStatus

pytestmark = pytest.mark.docker

CACHE = '"$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"'
LOOP = "while true; do sleep 0.05; done"


def docker_settings(cluster: Cluster, **changes: Any) -> NodeSettings:
    return cluster.settings(runtime=RuntimeKind.DOCKER, stop_grace_seconds=2.0, **changes)


def container_names(prefix: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=qm-{prefix}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


async def test_a_container_job_succeeds_and_sees_its_environment(
    cluster: Cluster, containers: str
) -> None:
    job_id = f"{containers}-ok"
    settings = cluster.settings(runtime=RuntimeKind.DOCKER, gpu_count=0)
    cache = settings.data_dir / "warmpool-cache" / job_id
    async with cluster.agent(settings):
        await cluster.until_host()
        script = (
            f"env > {CACHE}/env; pwd > {CACHE}/pwd; ls -d /opt/ml/sagemaker/warmpoolcache;"
            f" cat /opt/ml/input/config/resourceconfig.json > {CACHE}/resourceconfig.json;"
            f" cat /etc/hosts > {CACHE}/hosts"
        )
        await cluster.run(job_id, payload(script, env={"EPOCHS": "3"}), keep_alive=600)

        job = await cluster.until_status(job_id, JobStatus.SUCCEEDED)
        await cluster.until("the container is removed", lambda: not container_names(containers))
    assert job.attempts[-1].exit_code == 0
    seen = dict(line.split("=", 1) for line in (cache / "env").read_text().splitlines())
    assert seen["EPOCHS"] == "3"
    # The training-job contract in the container: algo-N names, the config files at
    # /opt/ml, the gang's names in /etc/hosts.
    assert json.loads(seen["SM_HOSTS"]) == ["algo-1"]
    assert (seen["SM_CURRENT_HOST"], seen["QM_HOST"]) == ("algo-1", "h1")
    assert seen["TRAINING_JOB_NAME"].endswith("-1")
    resource = json.loads((cache / "resourceconfig.json").read_text())
    assert (resource["current_host"], resource["hosts"]) == ("algo-1", ["algo-1"])
    assert any(
        line.split()[1:] == ["algo-1"]
        for line in (cache / "hosts").read_text().splitlines()
        if line.strip()
    )
    assert seen["SM_NUM_GPUS"] == "0"
    assert seen["SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"] == "/opt/ml/sagemaker/warmpoolcache"
    assert (seen["QM_JOB_ID"], seen["QM_ATTEMPT"]) == (job_id, "1")
    assert (cache / "pwd").read_text() == "/work\n"  # the image's WORKDIR


async def test_a_container_exiting_3_fails_with_its_log_tail(
    cluster: Cluster, containers: str
) -> None:
    job_id = f"{containers}-bad"
    async with cluster.agent(docker_settings(cluster)):
        await cluster.until_host()
        await cluster.run(job_id, payload("echo step 1; echo 'CUDA error' >&2; exit 3"))

        failed = await cluster.until_reported(job_id, ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.ALGORITHM_ERROR
    assert (failed.reason, failed.exit_code) == ("AlgorithmError: exit code 3", 3)
    assert "step 1" in failed.log_tail and "CUDA error" in failed.log_tail


async def test_a_missing_image_is_a_client_error_and_is_never_pulled(
    cluster: Cluster, containers: str
) -> None:
    job_id = f"{containers}-noimg"
    image = "quartermaster/does-not-exist:1"
    async with cluster.agent(docker_settings(cluster)):
        await cluster.until_host()
        await cluster.run(job_id, payload("true", image=image))

        failed = await cluster.until_reported(job_id, ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.CLIENT_ERROR
    assert failed.reason == f"ClientError: image not found: {image}"
    assert not cluster.reported(job_id, ev.JobRunning)
    assert container_names(containers) == []


async def test_a_command_missing_from_the_image_is_a_client_error(
    cluster: Cluster, containers: str
) -> None:
    job_id = f"{containers}-typo"
    async with cluster.agent(docker_settings(cluster)):
        await cluster.until_host()
        await cluster.run(job_id, payload(entrypoint=["train.py", "--epochs", "3"]))

        failed = await cluster.until_reported(job_id, ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.CLIENT_ERROR
    assert failed.reason.startswith("ClientError: exec train.py failed")
    assert failed.exit_code == 127


async def test_preempting_a_container_delivers_sigterm_and_confirms_the_stop(
    cluster: Cluster, containers: str
) -> None:
    job_id = f"{containers}-victim"
    settings = docker_settings(cluster)
    cache = settings.data_dir / "warmpool-cache" / job_id
    script = f"trap 'echo term > {CACHE}/marker; exit 143' TERM; touch {CACHE}/ready; {LOOP}"
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run(job_id, payload(script), keep_alive=600)
        await wait_for_file(cache / "ready")

        started = time.monotonic()
        await cluster.preempt(job_id)

        confirmed = await cluster.until_reported(job_id, ev.JobStopConfirmed)
        await cluster.until_status(job_id, JobStatus.RUNNABLE)
    assert confirmed.exit_code == 143
    assert time.monotonic() - started < 2.0  # SIGTERM, not the grace period's SIGKILL
    assert (cache / "marker").read_text() == "term\n"


async def test_a_restarted_agent_re_adopts_its_container(cluster: Cluster, containers: str) -> None:
    job_id = f"{containers}-long"
    settings = docker_settings(cluster)
    cache = settings.data_dir / "warmpool-cache" / job_id
    script = f"echo launched >> {CACHE}/launches; while [ ! -e {CACHE}/go ]; do sleep 0.05; done"
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run(job_id, payload(script), keep_alive=600)
        await wait_for_file(cache / "launches")
    assert container_names(containers) == [f"qm-{job_id}-1"]  # still running

    async with cluster.agent(settings):
        await cluster.until(
            "re-registered",
            lambda: sum(isinstance(e, ev.HostRegistered) for _, e in cluster.reports) == 2,
        )
        (cache / "go").touch()
        await cluster.until_status(job_id, JobStatus.SUCCEEDED)

    assert (cache / "launches").read_text() == "launched\n"
    assert len(cluster.reported(job_id, ev.JobStarting)) == 1


async def test_a_container_removed_while_the_agent_was_down_is_reported_lost(
    cluster: Cluster, containers: str
) -> None:
    job_id = f"{containers}-gone"
    settings = docker_settings(cluster)
    cache = settings.data_dir / "warmpool-cache" / job_id
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run(job_id, payload(f"touch {CACHE}/ready; {LOOP}"))
        await wait_for_file(cache / "ready")
    subprocess.run(["docker", "rm", "-f", f"qm-{job_id}-1"], capture_output=True, check=True)

    async with cluster.agent(settings):
        failed = await cluster.until_reported(job_id, ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.INFRASTRUCTURE_ERROR
    assert failed.reason == LOST_REASON


async def test_an_agent_stopping_as_a_job_ends_still_removes_its_container(
    cluster: Cluster, containers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final report is out and the container's removal under way when the agent is
    told to stop: the agent lets the removal finish. Cut there, an exited container
    stayed on the engine until the agent's next start."""
    job_id = f"{containers}-ends"
    removing = asyncio.Event()
    remove = DockerJob.remove

    async def slow_remove(self: DockerJob) -> None:
        removing.set()
        await asyncio.sleep(0.5)  # the agent's stop comes now
        await remove(self)

    monkeypatch.setattr(DockerJob, "remove", slow_remove)
    async with cluster.agent(docker_settings(cluster)):
        await cluster.until_host()
        await cluster.run(job_id, payload("exit 0"))
        await cluster.until_reported(job_id, ev.JobSucceeded)
        await asyncio.wait_for(removing.wait(), 15)
    assert not container_names(containers)
