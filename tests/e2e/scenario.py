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


def play_seed_scenario(c: Quartermaster, **payload: Any) -> None:
    """The seed scenario of spec/semantics.md on a stack with 3 hosts of UNIT.

    `payload` goes into every job (e.g. `image=` for the docker runtime).
    """
    queue = setup_queue(
        c,
        3,
        [
            ("QS1", 1, "LEND_AND_BORROW", 200, True),
            ("QS2", 1, "LEND", None, False),
            ("QS3", 1, "RESERVE", None, False),
        ],
    )
    high = queue.submit(shell(LONG, **payload), job_name="high", quota_share_name="QS1", priority=3)
    med = queue.submit(shell(LONG, **payload), job_name="med", quota_share_name="QS1", priority=2)
    low = queue.submit(shell(LONG, **payload), job_name="low", quota_share_name="QS1", priority=1)
    until("high and med run", lambda: status(c, high.job_id) == status(c, med.job_id) == "RUNNING")
    assert status(c, low.job_id) == "RUNNABLE"
    med_hosts = list(c.describe_job(med.job_id).attempts[-1].host_ids)

    qs2 = queue.submit(
        shell(LONG, **payload), job_name="qs2_job_1", quota_share_name="QS2", priority=1
    )
    until("qs2_job_1 runs", lambda: status(c, qs2.job_id) == "RUNNING")
    med_detail = c.describe_job(med.job_id)
    assert status(c, med.job_id) == "RUNNABLE"
    assert med_detail.preemption_summary.preempted_attempt_count == 1
    assert med_detail.status_reason.startswith("Preempted")
    assert list(c.describe_job(qs2.job_id).attempts[-1].host_ids) == med_hosts

    low.update(scheduling_priority=4)
    until("low runs", lambda: status(c, low.job_id) == "RUNNING")
    assert status(c, high.job_id) == "RUNNABLE"
    assert status(c, med.job_id) == "RUNNABLE"

    used = {
        h
        for j in (high, med, low, qs2)
        for a in c.describe_job(j.job_id).attempts
        for h in a.host_ids
    }
    assert len(used) == 2, f"QS3's host must stay idle throughout, used: {used}"
    for job in (low, qs2):
        job.terminate("test over")
    until("terminated", lambda: status(c, low.job_id) == status(c, qs2.job_id) == "FAILED")
