"""Small helpers shared by the end-to-end tests: setup through the public client, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from quartermaster.client import Quartermaster, TrainingQueue, training_job

UNIT = "ml.g5.xlarge"
QUEUE = "q"


def until(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout:.0f} s")
        time.sleep(0.1)


def setup_queue(
    client: Quartermaster, capacity: int, shares: list[tuple[Any, ...]]
) -> TrainingQueue:
    """shares: (name, limit, strategy, borrow_limit, in_share_preemption)."""
    client.create_service_environment("env", {UNIT: capacity})
    client.create_scheduling_policy("fifo")
    client.create_job_queue(QUEUE, "env", "fifo")
    for name, limit, strategy, borrow, preempt in shares:
        client.create_quota_share(QUEUE, name, {UNIT: limit}, strategy, borrow, preempt)
    return TrainingQueue(QUEUE, client)


def shell(script: str, **payload: Any) -> dict[str, Any]:
    """A process-runtime job running `sh -c script`."""
    return training_job(command=["sh", "-c", script], instance_type=UNIT, **payload)


LONG = "trap 'exit 143' TERM; sleep 600 & wait"


def status(client: Quartermaster, job_id: str) -> str:
    from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

    return pb.JobStatus.Name(client.describe_job(job_id).status).removeprefix("JOB_STATUS_")
