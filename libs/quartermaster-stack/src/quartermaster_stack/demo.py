"""The seed scenario, played through the public client against a running stack.

Three quota shares on three hosts; six jobs; a reclaim and an in-share
preemption; then a warm-pool reuse. Each job state change is printed as the
WatchServiceJobs stream delivers it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from quartermaster.cli.tables import enum_name, render, when
from quartermaster.client import Quartermaster, TrainingQueue, TrainingQueuedJob, training_job

QUEUE = "ml-queue"


def _watch(address: str, stop: threading.Event, credentials: Path | None) -> None:
    with _client(address, credentials) as client:
        while not stop.is_set():
            for change in client.watch(job_queue=QUEUE, timeout=1.0):
                reason = f"  ({change.status_reason})" if change.status_reason else ""
                print(
                    f"  {when(change.at)}  {change.job_name:<12} -> "
                    f"{enum_name(change, 'status')}{reason}",
                    flush=True,
                )
                if stop.is_set():
                    return


def _until(what: str, check: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"demo: {what} did not happen within {timeout:.0f} s")
        time.sleep(0.2)


def _client(address: str, credentials: Path | None) -> Quartermaster:
    if credentials is None:
        return Quartermaster(address, insecure=True)
    return Quartermaster(address, credentials_dir=credentials)


def play(address: str, instance_type: str, credentials: Path | None = None) -> None:
    """Play the scenario as the stack's admin (`credentials`: its credentials dir)."""
    client = _client(address, credentials)
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(address, stop, credentials), daemon=True)
    try:
        _setup(client, instance_type)
        watcher.start()
        _scenario(client, instance_type)
    finally:
        stop.set()
        watcher.join(timeout=3)
        client.close()


def _status(job: TrainingQueuedJob) -> str:
    return job.status


def _setup(client: Quartermaster, unit: str) -> None:
    print(
        f"\n[1] environment: 3 x {unit}; queue {QUEUE}; shares QS1 "
        "(LEND_AND_BORROW, borrow 200%, in-share preemption), QS2 (LEND), QS3 (RESERVE)"
    )
    client.create_service_environment("demo-env", {unit: 3})
    client.create_scheduling_policy("fifo")
    client.create_job_queue(QUEUE, "demo-env", "fifo")
    client.create_quota_share(
        QUEUE, "QS1", {unit: 1}, "LEND_AND_BORROW", borrow_limit=200, in_share_preemption=True
    )
    client.create_quota_share(QUEUE, "QS2", {unit: 1}, "LEND")
    client.create_quota_share(QUEUE, "QS3", {unit: 1}, "RESERVE")


def _scenario(client: Quartermaster, unit: str) -> None:
    step = iter(range(2, 20))
    queue = TrainingQueue(QUEUE, client)
    long_job = training_job(
        command=["sh", "-c", "trap 'exit 143' TERM; sleep 600 & wait"], instance_type=unit
    )

    print(f"\n[{next(step)}] QS1 submits high (3), med (2), low (1)")
    high = queue.submit(long_job, job_name="high", quota_share_name="QS1", priority=3)
    med = queue.submit(long_job, job_name="med", quota_share_name="QS1", priority=2)
    low = queue.submit(long_job, job_name="low", quota_share_name="QS1", priority=1)
    _until("high and med running", lambda: _status(high) == _status(med) == "RUNNING")
    print("  -> high and med run (med on capacity lent by QS2); low waits: QS3's unit is held back")

    print(f"\n[{next(step)}] QS2 submits qs2_job_1: QS2 reclaims its lent unit")
    qs2 = queue.submit(long_job, job_name="qs2_job_1", quota_share_name="QS2", priority=1)
    _until("qs2_job_1 running", lambda: _status(qs2) == "RUNNING")
    print(f"  -> med preempted and back to {_status(med)}; qs2_job_1 runs on the freed host")

    print(f"\n[{next(step)}] low is raised to priority 4: in-share preemption of high")
    low.update(scheduling_priority=4)
    _until("low running", lambda: _status(low) == "RUNNING")
    print(f"  -> high is {_status(high)}, low runs; QS3's host stayed idle throughout")

    print(f"\n[{next(step)}] warm pools: QS3 runs a job with keep-alive 120 s, then a matching one")
    short = training_job(
        command=[
            "sh",
            "-c",
            'echo step >> "$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY/steps"; sleep 1',
        ],
        instance_type=unit,
        keep_alive_seconds=120,
    )
    first = queue.submit(short, job_name="warm_a", quota_share_name="QS3")
    first.wait(timeout=120)
    _until("pool available", lambda: client.describe_job(first.job_id).warm_pool_status.status == 1)
    print("  -> warm_a SUCCEEDED; its host is kept warm (Available)")
    second = queue.submit(short, job_name="warm_b", quota_share_name="QS3")
    second.wait(timeout=120)
    a, b = client.describe_job(first.job_id), client.describe_job(second.job_id)
    print(
        f"  -> warm_b reused it: warm_a {enum_name(a.warm_pool_status, 'status')} "
        f"(reused by {a.warm_pool_status.reused_by_job[:8]}, billable "
        f"{a.warm_pool_status.resource_retained_billable_time_in_seconds} s); "
        f"warm_b ran on {list(b.attempts[-1].host_ids)} = {list(a.attempts[-1].host_ids)}"
    )

    print(f"\n[{next(step)}] where things stand")
    rows = [
        (
            j.job_name,
            enum_name(j, "status"),
            j.quota_share_name,
            j.scheduling_priority,
            j.status_reason,
        )
        for j in client.list_jobs(QUEUE)
    ]
    print(render(("JOB", "STATUS", "SHARE", "PRIO", "REASON"), rows))
    print()
    pools = [
        (
            p.training_job_name,
            enum_name(p, "status"),
            ",".join(p.host_ids),
            p.resource_retained_billable_time_in_seconds,
            p.reused_by_job[:8],
        )
        for p in client.list_warm_pools()
    ]
    print(render(("POOL OF", "STATUS", "HOSTS", "BILLABLE S", "REUSED BY"), pools))
    for job in (high, med, low, qs2):
        job.terminate("demo finished")
    print("\ndemo finished: the long jobs were terminated; the stack shuts down.")
