"""Scheduler failover, measured: replicas as real processes, kill -9 of the leader.

Shared by `tests/integration/test_cluster_failover.py` and `bench/failover_bench.py`.
Replicas run the console entry point (`python -m qm_scheduler`), configured only
through `QM_SCHEDULER_*` variables as in production. A failover is timed from the
SIGKILL of the lease holder to the dispatch of a job submitted right after it,
which only a surviving replica can make.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from quartermaster import events as ev
from quartermaster.bus import JetStreamLog, KvLease
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.events import AnyEvent

UNIT = "ml.g5.xlarge"
QUEUE = "q"


class SchedulerReplica:
    """One `python -m qm_scheduler` process named `instance_id`, logging to `log_file`."""

    def __init__(self, instance_id: str, env: Mapping[str, str], log_file: Path) -> None:
        self.instance_id = instance_id
        self.env = {**os.environ, **env, "QM_SCHEDULER_INSTANCE_ID": instance_id}
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "qm_scheduler"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """SIGKILL: no lease release, no goodbye."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def holds(self, holder_name: str | None) -> bool:
        return holder_name is not None and holder_name.startswith(f"{self.instance_id}-")


def scheduler_env(url: str, stream: str, prefix: str, name: str) -> dict[str, str]:
    """Variables for replicas on stream `stream`, with buckets of their own (`name`)."""
    return {
        "QM_SCHEDULER_NATS_URL": url,
        "QM_SCHEDULER_STREAM": stream,
        "QM_SCHEDULER_SUBJECT_PREFIX": prefix,
        "QM_SCHEDULER_LEASE_BUCKET": f"{name}-leases",
        "QM_SCHEDULER_SNAPSHOT_BUCKET": f"{name}-snapshots",
        "QM_SCHEDULER_HEARTBEAT_TIMEOUT_SECONDS": "3600",
    }


class DispatchWatch:
    """Folds the log; records when each job's dispatches are seen (monotonic clock)."""

    def __init__(self, log: JetStreamLog) -> None:
        self.follower = LogFollower(log)
        self.dispatched_at: dict[str, float] = {}
        self.dispatches: Counter[str] = Counter()
        self.follower.listen(self._on_batch)

    def _on_batch(self, seq: int, subject: str, events: list[AnyEvent]) -> None:
        for event in events:
            if isinstance(event, ev.JobDispatched):
                self.dispatches[event.job_id] += 1
                self.dispatched_at.setdefault(event.job_id, time.monotonic())

    async def until_dispatched(self, job_id: str, timeout_s: float = 30.0) -> float:
        deadline = time.monotonic() + timeout_s
        while job_id not in self.dispatched_at:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{job_id} not dispatched within {timeout_s}s")
            await asyncio.sleep(0.005)
        return self.dispatched_at[job_id]


async def seed(log: JetStreamLog, hosts: int) -> None:
    """One environment, queue and share with `hosts` registered hosts (no agents)."""
    await append(
        log,
        ev.ServiceEnvironmentCreated(
            at=1, name="env", capacity_limits=(ev.CapacityLimit(UNIT, hosts),)
        ),
        ev.SchedulingPolicyCreated(at=1, name="fifo"),
        ev.JobQueueCreated(at=1, name=QUEUE, service_environment="env", scheduling_policy="fifo"),
        ev.QuotaShareCreated(
            at=1,
            job_queue=QUEUE,
            name="A",
            capacity_limits=(ev.CapacityLimit(UNIT, hosts),),
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
        ),
    )
    for i in range(hosts):  # a host registers itself, on its own reports subject
        await log.append(
            subjects.reports(f"h{i}", log.prefix),
            encode_batch([ev.HostRegistered(at=1, host_id=f"h{i}", instance_type=UNIT)]),
        )


async def submit(log: JetStreamLog, job_id: str, at: float) -> int:
    return await append(
        log,
        ev.JobSubmitted(
            at=at,
            job_id=job_id,
            job_name=job_id,
            job_queue=QUEUE,
            quota_share="A",
            instance_type=UNIT,
        ),
    )


async def append(log: JetStreamLog, *events: ev.Event) -> int:
    return await log.append(subjects.requests(log.prefix), encode_batch(list(events)))


async def leader(leases: KvLease, key: str, replicas: list[SchedulerReplica]) -> int:
    """Index of the replica holding `key`, waiting until one does."""
    while True:
        holder = await leases.holder(key)
        for index, replica in enumerate(replicas):
            if replica.holds(holder):
                return index
        await asyncio.sleep(0.05)


async def failover_once(
    log: JetStreamLog,
    leases: KvLease,
    replicas: list[SchedulerReplica],
    watch: DispatchWatch,
    job_id: str,
    at: float,
) -> float:
    """Kill -9 the leader of the queue, submit `job_id`; seconds from kill to its dispatch.
    The killed replica is started again (a supervisor's restart) as a standby."""
    key = f"{log.stream}.{subjects.token(QUEUE)}"
    victim = replicas[await leader(leases, key, replicas)]
    victim.kill()
    killed_at = time.monotonic()
    await submit(log, job_id, at)
    dispatched_at = await watch.until_dispatched(job_id)
    victim.start()
    return dispatched_at - killed_at
