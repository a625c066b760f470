"""The whole stack with the docker runtime: real containers from the locally built image."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import StackFactory, client_for
from scenario import UNIT, setup_queue, status, until

from quartermaster.client import training_job

IMAGE = "quartermaster/job-runner:test"


def docker_ready() -> str | None:
    if shutil.which("docker") is None:
        return "no docker CLI"
    probe = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=30)
    if probe.returncode != 0:
        return f"no Docker engine or no image {IMAGE} (run scripts/bootstrap.sh as root)"
    return None


@pytest.fixture
def docker() -> None:
    reason = docker_ready()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"docker runtime unavailable in CI: {reason}")
        pytest.skip(reason)


def container_job(script: str, **payload: object) -> dict[str, object]:
    return training_job(image=IMAGE, command=["sh", "-c", script], instance_type=UNIT, **payload)  # type: ignore[arg-type]


@pytest.mark.docker
def test_jobs_run_in_containers_and_preemption_stops_them(
    docker: None, make_stack: StackFactory
) -> None:
    stack = make_stack(nodes=2, runtime="docker")
    c = client_for(stack)
    queue = setup_queue(
        c, 2, [("A", 1, "LEND_AND_BORROW", None, False), ("B", 1, "LEND", None, False)]
    )
    env_check = (
        'test "$SM_CURRENT_HOST" = "$(echo $SM_HOSTS | tr -d \'[]" \')" && '
        "test -d /opt/ml/sagemaker/warmpoolcache && "
        'test "$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY" = /opt/ml/sagemaker/warmpoolcache'
    )
    ok = queue.submit(container_job(env_check), job_name="env-check", quota_share_name="A")
    until("container job succeeded", lambda: status(c, ok.job_id) == "SUCCEEDED", timeout=60)
    failing = queue.submit(
        container_job("echo boom >&2; exit 3"), job_name="fails", quota_share_name="A"
    )
    until("container job failed", lambda: status(c, failing.job_id) == "FAILED", timeout=60)
    detail = c.describe_job(failing.job_id)
    assert detail.attempts[-1].exit_code == 3

    # A borrows B's unit; B's job reclaims it: the container gets SIGTERM and stops.
    long = "trap 'exit 143' TERM; while true; do sleep 0.2; done"
    own = queue.submit(container_job(long), job_name="own", quota_share_name="A")
    borrowed = queue.submit(container_job(long), job_name="borrowed", quota_share_name="A")
    until(
        "both run",
        lambda: status(c, own.job_id) == status(c, borrowed.job_id) == "RUNNING",
        timeout=60,
    )
    owner = queue.submit(container_job("exit 0"), job_name="owner", quota_share_name="B")
    until("owner succeeded", lambda: status(c, owner.job_id) == "SUCCEEDED", timeout=60)
    victim = c.describe_job(borrowed.job_id)
    assert victim.preemption_summary.preempted_attempt_count == 1
    for job in (own, borrowed):
        job.terminate("test over")
    until("stopped", lambda: status(c, own.job_id) == status(c, borrowed.job_id) == "FAILED")
